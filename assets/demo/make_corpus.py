#!/usr/bin/env python3
"""Writes assets/demo/corpus.txt, the text the demo model's tokenizer is trained on.

Every word below was written for kvchat; the script only combines the hand-written pieces
(with a fixed seed, so the output is the same on every run):
    python3 assets/demo/make_corpus.py > assets/demo/corpus.txt
"""

import random

rng = random.Random(20250301)

PROSE = """\
A chat is a long conversation with a short memory. Every reply the model writes depends on everything that came before it, so the engine keeps what it has already computed instead of reading the whole history again.
The key and value vectors of each token are the state of a conversation. They are small for one token and large for ten thousand, and they grow with every message.
When you open an old conversation, kvchat looks up its blocks in memory first, then on the disk. A block that is found does not have to be computed again.
Memory is a set of shelves. The closest shelf is small and fast, the next one is larger and slower, and the last one is the disk, which is slow but never forgets.
A cache hit feels like nothing at all: the answer simply starts at once. A cache miss feels like waiting for the kettle to boil.
On a laptop the graphics card has little memory of its own, so the engine moves cold blocks to the host and brings them back when they are needed.
Good software says what it is doing. The memory window shows every block as a small square, colored by the tier that holds it.
Quantized weights take four or eight bits instead of sixteen. The model becomes smaller, loads faster and fits on machines that could not run it before.
The tokenizer cuts text into pieces. Common words become a single piece, rare words are spelled out from smaller pieces, and anything unknown falls back to raw bytes.
In the morning I make coffee, read the news and answer a few messages before the day begins. The kettle clicks off and the kitchen smells of toast.
My neighbour waters her tomatoes at seven every evening. She says that plants, like people, like to be talked to.
We walked along the river after lunch. The water was high after the rain, and the ducks stayed close to the bank.
The train was late again, so I read three chapters of a book about old computers and the people who built them.
A good notebook is one you actually carry. Mine has a coffee stain on the cover and a list of ideas on the last page.
Computers remember things in layers: registers, caches, main memory, disks and, at the very bottom, the network.
The first computers filled whole rooms and had less memory than a greeting card that plays a song today.
When a program runs out of memory it should say so plainly and offer a way out, not vanish without a word.
If the same question is asked twice, the second answer should be faster than the first. That is the whole idea of a cache.
A branch in a conversation is like a fork in a path. Both paths share the ground you have already walked.
Editing an earlier message creates a new branch. The old reply is kept, and the new one reuses everything before the edit.
The system prompt is the same for many conversations, so its blocks are computed once and shared by all of them.
Sliding-window layers only look at the most recent tokens, so they can forget the blocks that fall out of the window.
Grouped-query attention lets several query heads share one key head, which makes the cache several times smaller.
A timeline of hits and misses tells a story: a burst of misses when a new conversation starts, then a long run of hits.
Batching many requests together keeps the processor busy, but every request still waits for the slowest part of the step.
The scheduler decides which sequence runs next. When memory is short, it evicts cached blocks first and pauses a sequence only as a last resort.
Evicting a block does not mean losing it: it moves down one tier, and it can come back up when someone needs it.
A checksum guards every block on the disk. If the bytes do not match, the block is thrown away and computed again.
The database writes in small transactions on its own thread, so the interface never waits for the disk.
My grandmother kept every letter she ever received in shoe boxes under the bed, sorted by year. That was her cold storage.
On Sundays we cook a big pot of soup and freeze it in small jars, so that a warm dinner is never more than five minutes away.
The library near my house has a reading room with tall windows, and in winter the radiators tick like old clocks.
Learning a language is mostly remembering: words, sounds, and the small habits of grammar that native speakers never notice.
When I travel I write down the names of the streets, because my phone always dies at the worst possible moment.
A bicycle with a basket is the best machine ever made for carrying bread, flowers and library books.
The power went out during the storm, and we played cards by candlelight until the fridge hummed back to life.
Rain on a tin roof is loud, but it is the kind of noise that makes it easier to sleep.
The old laptop still works. It is slow, the battery lasts twenty minutes, and it refuses to forget a single password.
Please summarise this article in three sentences, and keep the numbers exact.
Can you explain how a cache works to someone who has never written a line of code?
Write a short poem about a cat that sleeps on a warm keyboard.
What is the difference between memory and storage? Memory is fast and forgets when the power goes off; storage is slow and remembers.
Thank you! That was exactly what I needed. Could you also give me an example?
Sure. Imagine a desk and a filing cabinet: the desk is small but everything on it is within reach, while the cabinet holds everything but takes a walk to open.
Let me think about that step by step. First, we count the tokens; then we divide by the block size; then we round up.
I am not sure I understood the question. Do you mean the size of the model or the size of its cache?
Here is a list of things to pack: a charger, a water bottle, a warm jumper, two sandwiches and a map.
The meeting moved to Thursday at half past ten. Bring the slides and the numbers from last week.
Remember to buy milk, eggs, flour, lemons and a small bag of rice on the way home.
"""

SUBJECTS = [
    "The engine", "The cache", "My laptop", "The scheduler", "A small model", "The tokenizer",
    "The disk tier", "Our server", "The memory window", "Every block", "The user", "My friend",
    "The assistant", "The old computer", "A long conversation", "The graphics card",
    "The database", "The prefix index", "The kettle", "My sister", "The teacher", "A careful reader",
]
VERBS = [
    "remembers", "forgets", "keeps", "moves", "shares", "counts", "writes", "reads", "checks",
    "compresses", "evicts", "promotes", "loads", "saves", "explains", "repeats", "measures",
    "sorts", "finds", "returns",
]
OBJECTS = [
    "the last message", "every token", "the system prompt", "a block of sixteen tokens",
    "the shared prefix", "cold blocks", "the whole history", "a cup of tea", "the recent turns",
    "the answer", "a list of numbers", "the weights", "the key and value vectors",
    "an old conversation", "the first page", "the morning news", "a short poem", "the bytes",
]
TAILS = [
    "before the reply starts.", "without computing it again.", "when memory runs short.",
    "after a restart.", "in less than a second.", "while the user is still typing.",
    "and nobody notices.", "as quickly as it can.", "every few minutes.", "at the end of the day.",
    "only when it has to.", "for the next conversation.", "on the slowest tier.",
    "so the answer comes sooner.", "because the window is full.", "with a small checksum.",
]
QUESTIONS = [
    "How much memory does {n} tokens take?", "Why is the second answer faster than the first?",
    "What happens when the disk is full?", "Can you repeat the last sentence?",
    "Which tier holds block {n}?", "How long did the first token take?",
    "Is it raining in the city today?", "What should I cook for dinner tonight?",
    "Could you translate this into French?", "How many blocks does a {n}-token prompt need?",
]

CODE = [
    "def block_count(n_tokens, block_size):\n    return (n_tokens + block_size - 1) // block_size",
    "for i in range(10):\n    print(i, i * i)",
    "int add(int a, int b) { return a + b; }",
    "std::vector<int32_t> ids = tokenizer.encode(text, true, false);",
    "if (cache.contains(key)) {\n    hits += 1;\n} else {\n    misses += 1;\n}",
    "const size_t n_bytes = n_layers * n_kv_heads * head_dim * sizeof(uint16_t);",
    "SELECT id, title FROM conversations WHERE updated_at > ? ORDER BY updated_at DESC;",
    "let total: u64 = blocks.iter().map(|b| b.n_bytes).sum();",
    "function greet(name) {\n  return `Hello, ${name}!`;\n}",
    "while (queue.size() > 0) { auto job = queue.pop(); job.run(); }",
    "# Count words in a file\nwords = open('notes.txt').read().split()\nprint(len(words))",
    "$ kvchat-cli --model stories.gguf --prompt \"Once upon a time\" --max-tokens 64",
    "struct Block { uint64_t key; int32_t n_tokens; bool pinned; };",
    "x = [1, 2, 3, 4]\ny = {\"a\": 1, \"b\": 2}\nz = (x, y)",
    "assert(ratio >= 0.0 && ratio <= 1.0);",
    "git commit -m \"cache: demote blocks instead of dropping them\"",
    "<div class=\"message\"><p>Hello!</p></div>",
    "{\"role\": \"user\", \"content\": \"What time is it?\"}",
    "fn main() {\n    println!(\"{}\", 40 + 2);\n}",
    "for (int layer = 0; layer < n_layers; ++layer) {\n\tforward(layer);\n}",
]

# Lines in other languages and scripts, written for this corpus.
WORLD = [
    "Bonjour ! Je voudrais un café et un croissant, s'il vous plaît.",
    "La mémoire de l'ordinateur est pleine, mais le disque a encore de la place.",
    "Guten Morgen! Heute ist das Wetter schön, und wir gehen in den Park.",
    "Der Zwischenspeicher merkt sich die letzten Antworten.",
    "¿Dónde está la estación de tren? Necesito llegar antes de las ocho.",
    "El niño leyó un libro sobre las estrellas y el mar.",
    "Oggi piove, quindi restiamo a casa a leggere e a bere il tè.",
    "Obrigado pela ajuda! A conversa ficou muito mais rápida.",
    "Dzień dobry! Czy mogę prosić o szklankę wody?",
    "Привет! Как дела? Сегодня мы говорим о памяти компьютера.",
    "Καλημέρα! Ο καφές είναι έτοιμος.",
    "今日はいい天気ですね。公園を散歩しましょう。",
    "メモリが足りないときは、古いブロックをディスクに移します。",
    "我今天早上喝了一杯茶，然后去图书馆看书。",
    "缓存命中的时候，回答几乎马上就开始了。",
    "안녕하세요! 오늘 저녁에 같이 밥 먹을까요?",
    "Merhaba! Bugün hava çok güzel.",
    "Hej! Vi ses i morgon vid stationen.",
    "Tere hommikust! Kohv on laual.",
    "Xin chào! Hôm nay bạn thế nào?",
    "नमस्ते! आज मौसम अच्छा है।",
    "مرحبا! كيف حالك اليوم؟",
    "שלום! מה שלומך?",
    "Ça coûte 12,50 € — pas cher !",
    "Naïve café owners in Zürich serve crème brûlée to the façade painters.",
]

EMOJI = [
    "Great job! 🎉", "The build is green ✅", "Coffee first ☕ then code 💻",
    "It is raining again 🌧️ but the tea is hot 🍵", "Cache hit! 🚀", "Out of memory 😱",
    "Thanks a lot 🙏", "See you tomorrow 👋", "The cat sleeps on the keyboard 🐈⌨️",
    "Family trip: 👨‍👩‍👧‍👦 🚗 🏔️", "Flags: 🇫🇷 🇯🇵 🇧🇷", "Five stars ⭐⭐⭐⭐⭐",
    "Math symbols: ∑ ∫ √ ≤ ≥ ≠ ∞ π", "Arrows and boxes: → ← ↑ ↓ ■ □ ●",
]


def numbers_line():
    kind = rng.randrange(6)
    if kind == 0:
        return (f"On {rng.randrange(1, 29)}/{rng.randrange(1, 13)}/{rng.randrange(1990, 2031)} "
                f"the cache served {rng.randrange(100, 99999)} requests.")
    if kind == 1:
        return f"The price went from ${rng.randrange(1, 500)}.{rng.randrange(100):02d} to ${rng.randrange(1, 500)}.{rng.randrange(100):02d}."
    if kind == 2:
        return f"Block {rng.randrange(0, 4096)} holds tokens {rng.randrange(0, 2000) * 16} to {rng.randrange(2000, 4000) * 16}."
    if kind == 3:
        return f"Time to first token: {rng.randrange(5, 900)} ms; {rng.randrange(1, 120)}.{rng.randrange(10)} tokens per second."
    if kind == 4:
        return f"Call me at {rng.randrange(100, 999)}-{rng.randrange(100, 999)}-{rng.randrange(1000, 9999)} after {rng.randrange(1, 12)} pm."
    return f"{rng.randrange(2, 99)} + {rng.randrange(2, 99)} = ?, and 3.14159 is close to pi; 2^{rng.randrange(2, 32)} is a power of two."


def sentence():
    s = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(TAILS)}"
    if rng.random() < 0.3:
        s += " " + rng.choice(QUESTIONS).format(n=rng.choice([16, 64, 512, 4096, 32000]))
    return s


def dialogue():
    q = rng.choice(QUESTIONS).format(n=rng.choice([8, 128, 1000, 2048]))
    a = sentence()
    return f"User: {q}\nAssistant: {a}"


def main():
    out = [line for line in PROSE.splitlines() if line]
    for _ in range(700):
        r = rng.random()
        if r < 0.45:
            out.append(sentence())
        elif r < 0.6:
            out.extend(dialogue().split("\n"))
        elif r < 0.72:
            out.append(numbers_line())
        elif r < 0.84:
            out.extend(rng.choice(CODE).split("\n"))
        elif r < 0.94:
            out.append(rng.choice(WORLD))
        else:
            out.append(rng.choice(EMOJI))
    # A few lines with runs of spaces and indentation, which the tokenizer must keep.
    out += ["    indented by four spaces", "two  spaces  between  words", "\ttab first", "trailing space "]
    print("\n".join(out))


if __name__ == "__main__":
    main()
