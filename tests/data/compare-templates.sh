#!/usr/bin/env bash
# Compares kvchat's renders of chat templates with llama.cpp's, template by template: run by a developer, never by the tests.
#   usage: LLAMA_CPP=DIR tests/data/compare-templates.sh [NAME...]   (default: every template in the folder)
# DIR is a llama.cpp build with bin/llama-server; templates come from DIR/templates or
# DIR/models/templates (TEMPLATES=DIR overrides); BUILD=DIR is a kvchat build (default
# build/release). Each template renders the conversations of templates/conversations.json (as
# make-template-references.sh does) with Llama 2's vocabulary (BOS "<s>" added by the tokenizer,
# EOS "</s>"), through llama-server --jinja (POST /apply-template) and through
# `kvchat-cli render-chat --template`; the script prints how many renders are byte-identical and
# where the first difference is. Needs python3 (standard library only).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${BUILD:-$root/build/release}" && pwd)
: "${LLAMA_CPP:?set LLAMA_CPP to a llama.cpp build folder (with bin/llama-server)}"
if [ -z "${TEMPLATES:-}" ]; then
  for d in "$LLAMA_CPP/templates" "$LLAMA_CPP/models/templates"; do [ -d "$d" ] && TEMPLATES=$d && break; done
fi
: "${TEMPLATES:?no templates folder in LLAMA_CPP; set TEMPLATES=DIR}"
cli=$build/app/kvchat-cli
[ -x "$cli" ] || { echo "missing: $cli" >&2; exit 1; }
[ -x "$LLAMA_CPP/bin/llama-server" ] || { echo "missing: $LLAMA_CPP/bin/llama-server" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$cli" mkmodel --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 \
  --vocab-from "$root/tests/data/vocab/ggml-vocab-llama-spm.gguf" -o "$work/model.gguf" >/dev/null 2>&1

TZ=UTC python3 - "$LLAMA_CPP/bin/llama-server" "$cli" "$work" "$TEMPLATES" "$root/tests/data/templates/conversations.json" "$@" <<'EOF'
import datetime, json, os, subprocess, sys, time, urllib.request
server, cli, work, templates, conversations_file = sys.argv[1:6]
names = sys.argv[6:] or sorted(f[:-6] for f in os.listdir(templates) if f.endswith(".jinja"))
base = json.load(open(conversations_file))
system, turns = base["system"], base["turns"]
reasoning = turns[:3] + [base["reasoning_reply"]] + turns[4:]
conversations = [
    ("system, three turns, generation prompt", [system] + turns, True),
    ("system, three turns, no generation prompt", [system] + turns, False),
    ("no system, three turns, generation prompt", turns, True),
    ("system, first turn, generation prompt", [system, turns[0]], True),
    ("system, reasoning in an earlier reply, generation prompt", [system] + reasoning, True),
]
port = 18736
n_exact = 0
for name in names:
    template = os.path.join(templates, name + ".jinja")
    proc = subprocess.Popen([server, "-m", os.path.join(work, "model.gguf"), "--jinja", "--chat-template-file", template,
                             "--port", str(port), "-c", "256", "-t", "1", "-np", "1", "--no-webui"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    up = False
    for _ in range(150):
        if proc.poll() is not None:
            break
        try:
            urllib.request.urlopen("http://localhost:%d/health" % port)
            up = True
            break
        except Exception:
            time.sleep(0.2)
    if not up:
        proc.kill()
        proc.wait()
        print("%s: llama-server does not start with it" % name)
        continue
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    same, first_difference = 0, ""
    for case, messages, generation_prompt in conversations:
        body = json.dumps({"messages": messages, "add_generation_prompt": generation_prompt}).encode()
        request = urllib.request.Request("http://localhost:%d/apply-template" % port, body, {"Content-Type": "application/json"})
        theirs = json.load(urllib.request.urlopen(request))["prompt"]
        with open(os.path.join(work, "messages.json"), "w") as f:
            json.dump(messages, f)
        args = [cli, "render-chat", "--template", template, "--bos", "<s>", "--eos", "</s>", "--add-bos",
                "--messages", os.path.join(work, "messages.json"), "--date", today]
        if not generation_prompt:
            args.append("--no-generation-prompt")
        r = subprocess.run(args, capture_output=True)
        ours = r.stdout.decode("utf-8", "replace")
        if r.returncode == 0 and ours == theirs:
            same += 1
            continue
        if first_difference:
            continue
        if r.returncode != 0:
            first_difference = "%s: kvchat: %s" % (case, r.stderr.decode().strip().splitlines()[-1])
        else:
            i = next((k for k in range(min(len(ours), len(theirs))) if ours[k] != theirs[k]), min(len(ours), len(theirs)))
            first_difference = "%s: at byte %d llama.cpp has %r, kvchat %r" % (case, i, theirs[i:i + 40], ours[i:i + 40])
    proc.kill()
    proc.wait()
    n_exact += same == len(conversations)
    print("%s: %d/%d byte-exact%s" % (name, same, len(conversations), "; " + first_difference if first_difference else ""), flush=True)
print("%d of %d templates render every conversation as llama.cpp does" % (n_exact, len(names)))
EOF
