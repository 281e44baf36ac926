// kvchat-cli: the headless command line of kvchat.
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "--version") == 0)) {
    std::printf("kvchat-cli %s\n", KVC_VERSION);
    return 0;
  }
  std::fprintf(stderr, "usage: kvchat-cli COMMAND [OPTIONS]\n");
  return 2;
}
