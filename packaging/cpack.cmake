# Installed layout and CPack packages (.deb, .tar.gz): binaries in bin/, shipped assets in
# share/kvchat/assets (found next to the executable's prefix), a desktop entry and an icon.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/assets/demo ${PROJECT_SOURCE_DIR}/assets/scripts ${PROJECT_SOURCE_DIR}/assets/models
  DESTINATION share/kvchat/assets PATTERN "*.py" EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/assets/kvchat.desktop DESTINATION share/applications)
install(FILES ${PROJECT_SOURCE_DIR}/assets/icons/kvchat.svg DESTINATION share/icons/hicolor/scalable/apps)

set(CPACK_PACKAGE_NAME kvchat)
set(CPACK_PACKAGE_VENDOR "kvchat")
set(CPACK_PACKAGE_CONTACT "kvchat developers <kvchat@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR "DEB;TGZ")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
# Runtime libraries from the binaries' own links (dpkg-shlibdeps: libmd4c0 among them), plus
# fonts the GUI prefers and xdg-open, which opens the links of answers.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "fonts-dejavu-core, fonts-noto-core, fonts-noto-cjk, fonts-symbola, xdg-utils")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "xvfb")
set(CPACK_ARCHIVE_COMPONENT_INSTALL OFF)
# CUDA: packages carry machine code for Turing (sm_75, the oldest CUDA 13 accepts), Ampere
# (80, 86), Ada (89), Hopper (90), Blackwell (100, 120) plus sm_120 PTX for later GPUs; the
# "package" preset sets this list. A package built with another list says so at configure.
set(KVC_CUDA_PACKAGE_ARCHITECTURES "75-real;80-real;86-real;89-real;90-real;100-real;120")
if(KVC_CUDA AND NOT CMAKE_CUDA_ARCHITECTURES STREQUAL KVC_CUDA_PACKAGE_ARCHITECTURES)
  message(STATUS "kvchat: packages from this build run CUDA only on ${CMAKE_CUDA_ARCHITECTURES} "
                 "(use cmake --preset package for every consumer GPU)")
endif()
include(CPack)
