#!/usr/bin/env bash
# Renders chat templates with llama.cpp into tests/data/templates: run by a developer, never by the tests.
#   usage: LLAMA_CPP=DIR tests/data/make-template-references.sh [BUILD_DIR]   (default build/release)
#          ONLY="NAME..." renders only those templates (the others' references keep their date)
# DIR is a llama.cpp build with bin/llama-server; the templates are read from DIR/templates or
# DIR/models/templates (TEMPLATES=DIR overrides). BUILD_DIR is a kvchat build whose test-models/
# holds the vocabularies (run `ctest --preset release -R test_vocabularies` first). Needs python3
# (standard library only).
#
# For each template below it copies NAME.jinja into tests/data/templates/ and writes
# NAME.expected.json: the prompt llama-server --jinja returns from POST /apply-template for a
# fixed set of conversations, with what the template saw: the vocabulary (a random-weight model
# made by `kvchat-cli mkmodel --vocab-from` on it), bos_token and eos_token, whether llama.cpp
# drops a leading BOS text because its tokenizer adds the BOS token, enable_thinking and
# date_string (llama.cpp defines both; the date is today's, so the tests render with it).
# Templates marked "tools" also render the cases of conversations-tools.json: tool calls and their
# results, reasoning (reasoning_content), the tools' definitions and chat_template_kwargs
# (reasoning_effort), as a client sends them to /v1/chat/completions.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build/release}" && pwd)
: "${LLAMA_CPP:?set LLAMA_CPP to a llama.cpp build folder (with bin/llama-server)}"
server=$LLAMA_CPP/bin/llama-server
cli=$build/app/kvchat-cli
vocabs=$build/test-models
out=$root/tests/data/templates
if [ -z "${TEMPLATES:-}" ]; then
  for d in "$LLAMA_CPP/templates" "$LLAMA_CPP/models/templates"; do [ -d "$d" ] && TEMPLATES=$d && break; done
fi
: "${TEMPLATES:?no templates folder in LLAMA_CPP; set TEMPLATES=DIR}"
for tool in "$server" "$cli"; do [ -x "$tool" ] || { echo "missing: $tool" >&2; exit 1; }; done

# template (file name without .jinja) -> the vocabulary whose BOS/EOS it sees. Where the family's
# own vocabulary is not in the test set (Gemma, SmolLM3), a vocabulary with the same BOS handling.
templates=(
  "meta-llama-Llama-3.1-8B-Instruct ggml-vocab-llama-bpe"
  "meta-llama-Llama-3.2-3B-Instruct ggml-vocab-llama-bpe"
  "meta-llama-Llama-3.3-70B-Instruct ggml-vocab-llama-bpe"
  "Qwen-Qwen2.5-7B-Instruct ggml-vocab-qwen2"
  "Qwen-Qwen3-0.6B ggml-vocab-qwen2"
  "deepseek-ai-DeepSeek-R1-Distill-Llama-8B ggml-vocab-deepseek-llm"
  "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B ggml-vocab-deepseek-llm"
  "google-gemma-2-2b-it ggml-vocab-llama-spm"
  "microsoft-Phi-3.5-mini-instruct ggml-vocab-phi-3"
  "HuggingFaceTB-SmolLM3-3B ggml-vocab-llama-bpe"
  "openai-gpt-oss-120b ggml-vocab-llama-spm tools"
  "LFM2.5-Instruct ggml-vocab-llama-bpe tools"
)

work=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$out"
export TZ=UTC  # strftime_now and date_string in UTC: the date the tests render with
port=18735

start_server() {  # MODEL TEMPLATE_FILE
  "$server" -m "$1" --jinja --chat-template-file "$2" --port $port -c 256 -t 1 -np 1 --no-webui \
    >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 150); do
    curl -sf "localhost:$port/health" >/dev/null 2>&1 && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.2
  done
  echo "llama-server did not start with $2:" >&2
  tail -20 "$work/server.log" >&2
  exit 1
}
stop_server() {
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}

# The conversations (conversations.json here): system + three turns + a final user message, with
# and without the generation prompt; without a system message; the first turn alone; an earlier
# reply that holds reasoning. Whitespace, quotes, newlines and non-ASCII text are there on purpose.
cp "$out/conversations.json" "$work/cases.json"
cp "$out/conversations-tools.json" "$work/tool-cases.json"

# Writes NAME.expected.json from the running server (template NAME, vocabulary VOCAB).
render_cases() {  # NAME VOCAB PROBE_JSON TOOLS
  python3 - "$port" "$work/cases.json" "$out/$1.expected.json" "$1" "$2" "$3" "$4" "$work/tool-cases.json" <<'EOF'
import json, sys, urllib.request
port, cases_file, out_file, name, vocab, probe, tools, tool_cases_file = sys.argv[1:9]
base = json.load(open(cases_file))
probe = json.loads(probe)

def apply(messages, add_generation_prompt, extra={}):
    body = json.dumps(dict({"messages": messages, "add_generation_prompt": add_generation_prompt}, **extra)).encode()
    req = urllib.request.Request("http://localhost:%s/apply-template" % port, body, {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))["prompt"]

props = json.load(urllib.request.urlopen("http://localhost:%s/props" % port))
system, turns = base["system"], base["turns"]
reasoning = turns[:3] + [base["reasoning_reply"]] + turns[4:]
conversations = [
    ("system, three turns, generation prompt", [system] + turns, True),
    ("system, three turns, no generation prompt", [system] + turns, False),
    ("no system, three turns, generation prompt", turns, True),
    ("system, first turn, generation prompt", [system, turns[0]], True),
    ("system, reasoning in an earlier reply, generation prompt", [system] + reasoning, True),
]
cases = [{"name": n, "add_generation_prompt": g, "messages": m, "prompt": apply(m, g)} for n, m, g in conversations]
if tools == "tools":
    tool_doc = json.load(open(tool_cases_file))
    for c in tool_doc["cases"]:
        extra = {}
        if c.get("with_tools"):
            extra["tools"] = tool_doc["tools"]
        if "chat_template_kwargs" in c:
            extra["chat_template_kwargs"] = c["chat_template_kwargs"]
        case = {"name": c["name"], "add_generation_prompt": c["add_generation_prompt"], "messages": c["messages"]}
        case.update(extra)
        case["prompt"] = apply(c["messages"], c["add_generation_prompt"], extra)
        cases.append(case)
doc = {
    "template": name + ".jinja",
    "source": "llama.cpp models/templates/%s.jinja, rendered by llama-server --jinja (POST /apply-template), %s" % (name, props.get("build_info", "?")),
    "vocabulary": vocab + ".gguf",
    "bos_token": props["bos_token"],
    "eos_token": props["eos_token"],
    "bos_stripped": probe["bos_stripped"],
    "enable_thinking": probe["enable_thinking"],
    "date_string": probe["date_string"],
    "cases": cases,
}
with open(out_file, "w", encoding="utf-8") as f:
    json.dump(doc, f, ensure_ascii=False, indent=1)
    f.write("\n")
print("%s: %d cases (bos %r%s, eos %r, enable_thinking %s)" % (name, len(cases), doc["bos_token"],
      ", dropped at the start" if doc["bos_stripped"] else "", doc["eos_token"], doc["enable_thinking"]))
EOF
}

# What llama.cpp passes the template besides the messages: the template with a line that prints
# enable_thinking and date_string appended (or, where that changes llama.cpp's view of the
# template, prepended); the rest of its render must be the template's own. And whether a leading
# bos_token is dropped (llama.cpp drops it when its tokenizer adds the BOS token).
probe() {  # NAME MODEL
  local f=$TEMPLATES/$1.jinja line="[[probe enable_thinking={{ enable_thinking }} date_string={{ date_string }}]]"
  start_server "$2" "$f"
  local plain
  plain=$(apply_one)
  stop_server
  local where probed=
  for where in suffix prefix; do
    if [ $where = suffix ]; then { cat "$f"; printf '%s' "$line"; } >"$work/probe.jinja"
    else { printf '%s' "$line"; cat "$f"; } >"$work/probe.jinja"; fi
    start_server "$2" "$work/probe.jinja"
    probed=$(apply_one | python3 -c '
import json, re, sys
plain, p = json.loads(sys.argv[1]), json.load(sys.stdin)
m = re.search(r"\[\[probe enable_thinking=(\w+) date_string=([^]]*)\]\]", p)
rest = p[:m.start()] + p[m.end():]
same = rest.rstrip() == plain.rstrip() or rest.rstrip().endswith(plain.rstrip())
print(json.dumps({"enable_thinking": m.group(1) == "True", "date_string": m.group(2)}) if same else "")' "$plain")
    stop_server
    [ -n "$probed" ] && break
  done
  [ -n "$probed" ] || { echo "$1: a probe line changes the render: its enable_thinking/date_string are not known" >&2; exit 1; }
  printf '%s' "{{ bos_token }}" >"$work/bos.jinja"
  start_server "$2" "$work/bos.jinja"
  local bos_stripped=false
  [ "$(apply_one)" = '""' ] && bos_stripped=true
  stop_server
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["bos_stripped"]=sys.argv[2]=="true"; print(json.dumps(d))' \
    "$probed" "$bos_stripped"
}
# The running server's render of one user message "Hi", as a JSON string.
apply_one() {
  curl -sf "localhost:$port/apply-template" -H 'Content-Type: application/json' \
    -d '{"messages": [{"role": "user", "content": "Hi"}]}' | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["prompt"]))'
}

day_before=$(date +%F)
for entry in "${templates[@]}"; do
  read -r name vocab tools <<<"$entry"
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then continue; fi
  src=$TEMPLATES/$name.jinja
  [ -f "$src" ] || { echo "missing template: $src" >&2; exit 1; }
  vocab_file=$vocabs/$vocab.gguf
  [ -f "$vocab_file" ] || vocab_file=$root/tests/data/vocab/$vocab.gguf
  [ -f "$vocab_file" ] || { echo "missing vocabulary $vocab.gguf: run ctest --preset release -R test_vocabularies" >&2; exit 1; }
  model=$work/$vocab.gguf
  [ -f "$model" ] || "$cli" mkmodel --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --vocab-from "$vocab_file" \
    -o "$model" >"$work/mkmodel.log" 2>&1 || { cat "$work/mkmodel.log" >&2; exit 1; }
  cp "$src" "$out/$name.jinja"
  probed=$(probe "$name" "$model")
  start_server "$model" "$src"
  render_cases "$name" "$vocab" "$probed" "${tools:-}"
  stop_server
done
[ "$(date +%F)" = "$day_before" ] || { echo "the date changed while rendering: run again" >&2; exit 1; }
du -ch "$out"/* | tail -1
