#!/usr/bin/env python3
"""kvchat against llama.cpp on the CPU, side by side: the tables of BENCHMARKS.md's "kvchat and
llama.cpp side by side" section. See bench/compare.sh for the usage.

Every comparison runs both engines on the same GGUF file (made here by `kvchat-cli mkmodel`),
in rounds; within a round the two run one after the other, and the order flips from round to
round. A ratio is kvchat's figure over llama.cpp's of the same round; tables give the median of
the rounds' ratios first, then the medians of the absolute figures beside them.
"""

import argparse
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, env=None):
    log(" ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"failed ({exit_reason(p.returncode)}): {' '.join(cmd)}" + exit_hint(p.returncode))
    return p.stdout


def exit_reason(rc):
    """A process's exit status in words: a signal by its name."""
    if rc >= 0:
        return f"exit status {rc}"
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


def exit_hint(rc):
    if rc == -signal.SIGILL:
        return ("\nIt used an instruction this CPU does not have: it was built for another CPU (llama.cpp built "
                "with GGML_NATIVE takes its build machine's instruction set). Build it on this machine and pass "
                "that build's bin folder.")
    return ""


def med(xs):
    return statistics.median(xs) if xs else float("nan")


class Peers:
    def __init__(self, args):
        self.cli = args.kvchat_cli
        self.llama = args.llama_bin
        self.threads = str(args.threads)
        self.work = args.work
        self.vocab = os.path.join(ROOT, "tests/data/vocab/ggml-vocab-llama-spm.gguf")
        self.env = dict(os.environ, LD_LIBRARY_PATH=self.llama)

    def model(self, preset, wtype, extra=()):
        """The file for a preset and weight type, made once (mkmodel output depends only on its options)."""
        tag = "".join(e.strip("-") for e in extra)
        path = os.path.join(self.work, f"{preset}-{wtype}{'-' + tag if tag else ''}.gguf")
        if not os.path.exists(path):
            os.makedirs(self.work, exist_ok=True)
            run([self.cli, "mkmodel", "-q", "--preset", preset, "--type", wtype, "--vocab-from", self.vocab,
                 "-o", path + ".part", *extra])
            os.rename(path + ".part", path)
        return path

    def kvchat_bench(self, model, extra):
        return json.loads(run([self.cli, "bench", "-m", model, "-t", self.threads, "--json", *extra]))

    def llama_bench(self, model, extra):
        out = run([os.path.join(self.llama, "llama-bench"), "-m", model, "-t", self.threads, "-o", "json", *extra],
                  env=self.env)
        return json.loads(out)

    def llama_batched(self, model, extra):
        out = run([os.path.join(self.llama, "llama-batched-bench"), "-m", model, "-t", self.threads, *extra],
                  env=self.env)
        rows = []
        for line in out.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 10 and all(re.fullmatch(r"[0-9.]+", c) for c in cells):
                pp, tg, b, n_kv, t_pp, s_pp, t_tg, s_tg, t, s = (float(c) for c in cells)
                rows.append({"B": int(b), "T_PP": t_pp, "S_PP": s_pp, "S_TG": s_tg, "S": s})
        if not rows:
            raise SystemExit("llama-batched-bench printed no table:\n" + out)
        return rows


def llama_ts(entries, n_prompt, n_gen):
    for e in entries:
        if e["n_prompt"] == n_prompt and e["n_gen"] == n_gen:
            return e["avg_ts"]
    raise SystemExit(f"llama-bench printed no pp{n_prompt}/tg{n_gen} entry")


def alternate(rounds, a, b):
    """Runs a() and b() in `rounds` rounds, flipping their order each round; returns both lists."""
    ra, rb = [], []
    for r in range(rounds):
        if r % 2 == 0:
            ra.append(a())
            rb.append(b())
        else:
            rb.append(b())
            ra.append(a())
    return ra, rb


def ratio_cell(xs, ys):
    rs = [x / y for x, y in zip(xs, ys) if y > 0]
    if not rs:
        return "n/a"
    lo, hi = min(rs), max(rs)
    return f"**{med(rs):.2f}×**" + (f" ({lo:.2f}-{hi:.2f})" if len(rs) > 1 else "")


def section_decode(p, args, shapes, title, reps=3):
    print(f"\n### {title}\n")
    print(f"`kvchat-cli bench -t {args.threads} --pp 128 --tg 32 -r {reps} --bandwidth` against "
          f"`llama-bench -t {args.threads} -p 128 -n 32 -r {reps}`, {args.rounds} alternated rounds. Decode ceiling = "
          "the memory-read bandwidth measured in the same kvchat run ÷ the bytes one decode step reads "
          "(every weight but token_embd, of which one row, unless the output is tied to it).\n")
    print("| model | weights | prefill pp128 | decode tg32 | kvchat pp | llama.cpp pp | kvchat tg | llama.cpp tg "
          "| ceiling | kvchat of ceiling | llama.cpp of ceiling |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for preset, wtype in shapes:
        m = p.model(preset, wtype)
        ks, ls = alternate(args.rounds,
                           lambda: p.kvchat_bench(m, ["--pp", "128", "--tg", "32", "-r", str(reps), "--bandwidth"]),
                           lambda: p.llama_bench(m, ["-p", "128", "-n", "32", "-r", str(reps)]))
        kpp = [k["prefill_tok_s"] for k in ks]
        ktg = [k["decode_tok_s"] for k in ks]
        lpp = [llama_ts(l, 128, 0) for l in ls]
        ltg = [llama_ts(l, 0, 32) for l in ls]
        ceil = [k["decode_ceiling_tok_s"] for k in ks]
        kfrac = [t / c for t, c in zip(ktg, ceil)]
        lfrac = [t / c for t, c in zip(ltg, ceil)]
        print(f"| {preset} | {ks[0]['weights']} | {ratio_cell(kpp, lpp)} | {ratio_cell(ktg, ltg)} | {med(kpp):.1f} "
              f"| {med(lpp):.1f} | {med(ktg):.1f} | {med(ltg):.1f} | {med(ceil):.1f} | {100 * med(kfrac):.0f} % "
              f"| {100 * med(lfrac):.0f} % |", flush=True)


LONG_MANY_ROUNDS_DEPTH = 8192  # deeper contexts get one round
LONG_KV_PAIRS = [("f16", "f16"), ("int8", "q8_0"), ("int4", "q4_0")]  # kvchat's KV format, llama.cpp's


def section_long(p, args):
    print("\n### Long context: decode at depth\n")
    print(f"`kvchat-cli bench -t {args.threads} -d N --pp 1 --tg 32 -r 2 --kv-type T` against "
          f"`llama-bench -t {args.threads} -d N -p 0 -n 32 -r 1 --no-warmup -fa 1 -ctk T -ctv T` (llama-bench fills "
          "the context again for every repetition, kvchat once), TinyLlama shape Q4_0, "
          f"{args.rounds} alternated rounds up to {LONG_MANY_ROUNDS_DEPTH:,} tokens, one deeper. KV bytes per "
          "token (22 layers × 4 KV heads × 64 × K and V): F16 22,528; kvchat int8 and llama.cpp q8_0 11,968; kvchat "
          "int4 and llama.cpp q4_0 6,336 (one F16 scale per 32 values in both).\n")
    print("| depth | kvchat KV | llama.cpp KV | decode ratio | kvchat tg | llama.cpp tg |")
    print("|---|---|---|---|---|---|")
    m = p.model("tinyllama", "q4_0")
    pairs = [(kt, lt) for kt, lt in LONG_KV_PAIRS if kt in args.kv]
    for depth in args.depths:
        # llama-bench refills the context for each run: at 16K on 2 cores that is 8-26 minutes a format.
        rounds = args.rounds if depth <= LONG_MANY_ROUNDS_DEPTH else 1
        for kt, lt in pairs:
            ks, ls = alternate(
                rounds,
                lambda: p.kvchat_bench(m, ["-d", str(depth), "--pp", "1", "--tg", "32", "-r", "2", "--kv-type", kt]),
                lambda: p.llama_bench(m, ["-d", str(depth), "-p", "0", "-n", "32", "-r", "1", "--no-warmup", "-fa", "1",
                                          "-ctk", lt, "-ctv", lt]))
            ktg = [k["decode_tok_s"] for k in ks]
            ltg = [llama_ts(l, 0, 32) for l in ls]
            print(f"| {depth} | {kt} | {lt} | {ratio_cell(ktg, ltg)} | {med(ktg):.1f} | {med(ltg):.1f} |",
                  flush=True)


def section_parallel(p, args):
    widths = ",".join(str(w) for w in args.widths)
    print("\n### Many conversations at once\n")
    print(f"`kvchat-cli bench -t {args.threads} --parallel {widths} --pp 128 --tg 32 -r 1` (the engine: each "
          f"conversation its own prompt, all submitted at once) against `llama-batched-bench -t {args.threads} "
          f"-npp 128 -ntg 32 -npl {widths}`, TinyLlama shape Q4_0, {args.rounds} alternated rounds. Decode = "
          "tokens of all conversations per second once every one has its first token (llama.cpp: S_TG); time to "
          "the last first token = kvchat's largest TTFT (llama.cpp: T_PP, prefill of every prompt).\n")
    print("| conversations | decode ratio | kvchat decode | llama.cpp decode | last first token, kvchat | llama.cpp |")
    print("|---|---|---|---|---|---|")
    m = p.model("tinyllama", "q4_0")
    ctx = str(max(args.widths) * (128 + 32) + 256)
    ks, ls = alternate(args.rounds,
                       lambda: p.kvchat_bench(m, ["--parallel", widths, "--pp", "128", "--tg", "32", "-r", "1"]),
                       lambda: p.llama_batched(m, ["-c", ctx, "-npp", "128", "-ntg", "32", "-npl", widths]))
    for w in args.widths:
        kd = [next(r for r in k["parallel"] if r["conversations"] == w) for k in ks]
        ld = [next(r for r in l if r["B"] == w) for l in ls]
        kdec = [r["decode_tok_s"] for r in kd]
        ldec = [r["S_TG"] for r in ld]
        kttft = [r["ttft_max_ms"] for r in kd]
        lttft = [1000 * r["T_PP"] for r in ld]
        print(f"| {w} | {ratio_cell(kdec, ldec)} | {med(kdec):.1f} | {med(ldec):.1f} | {med(kttft):.0f} ms "
              f"| {med(lttft):.0f} ms |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("llama_bin", help="folder of llama.cpp's programs (llama-bench, llama-batched-bench)")
    ap.add_argument("--kvchat-cli", default=os.path.join(ROOT, "build/release/app/kvchat-cli"))
    ap.add_argument("--work", default=os.environ.get("COMPARE_WORK", "/tmp/kvchat-compare"),
                    help="where the model files are made and kept")
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", "3")))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sections", default=os.environ.get("SECTIONS", "decode,archs,gemma,long,parallel,big"),
                    help="which tables: decode, archs, gemma, long, parallel, big")
    ap.add_argument("--depths", default=os.environ.get("DEPTHS", "4096,16384"))
    ap.add_argument("--widths", default=os.environ.get("WIDTHS", "1,2,4,8"))
    ap.add_argument("--kv", default=os.environ.get("KV", "f16,int8,int4"),
                    help="the long section's KV formats (kvchat's names), each against its llama.cpp peer")
    args = ap.parse_args()
    args.kv = args.kv.split(",")
    known = [kt for kt, _ in LONG_KV_PAIRS]
    unknown = [k for k in args.kv if k not in known]
    if unknown:
        raise SystemExit(f"--kv: unknown format {','.join(unknown)} (choose from {', '.join(known)})")
    args.depths = [int(d) for d in args.depths.split(",")]
    args.widths = [int(w) for w in args.widths.split(",")]
    for f in (args.kvchat_cli, os.path.join(args.llama_bin, "llama-bench")):
        if not os.path.exists(f):
            raise SystemExit(f"missing: {f} (build kvchat first: cmake --preset release && cmake --build --preset "
                             "release)")
    p = Peers(args)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
                platform.processor())
    lb = json.loads(run([os.path.join(args.llama_bin, "llama-bench"), "-m", p.model("tinyllama", "q4_0"), "-t",
                         "1", "-p", "1", "-n", "0", "-r", "1", "-o", "json"], env=p.env))[0]
    print(f"kvchat {commit}; llama.cpp build {lb['build_number']} ({lb['build_commit']}); {cpu}, "
          f"{os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    sections = args.sections.split(",")
    if "decode" in sections:
        section_decode(p, args, [("tinyllama", t) for t in ("q4_0", "q8_0", "q4_k_m")],
                       "Prefill and decode: TinyLlama-1.1B shape")
    if "archs" in sections:
        section_decode(p, args, [(s, t) for s in ("llama3.2-1b", "qwen3-1.7b") for t in ("q4_k_m", "q8_0")],
                       "Prefill and decode: Llama 3.2 1B and Qwen3 1.7B shapes")
    if "gemma" in sections:
        section_decode(p, args, [("gemma3-1b", t) for t in ("q8_0", "q4_k_m")],
                       "Prefill and decode: Gemma 3 1B shape (22 local layers of window 512, 4 global)")
    if "long" in sections:
        section_long(p, args)
    if "parallel" in sections:
        section_parallel(p, args)
    if "big" in sections:
        section_decode(p, args, [(s, t) for s in ("llama3.2-3b", "mistral-7b") for t in ("q4_k_m", "q8_0")],
                       "Prefill and decode: Llama 3.2 3B and Mistral 7B shapes", reps=1)
    print(f"\nfinished {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
