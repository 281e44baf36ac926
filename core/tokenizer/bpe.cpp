// Byte-level BPE: merge ranks, the word merge loop and the byte fallback.
#include "core/tokenizer/bpe.h"

#include <algorithm>
#include <queue>

#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/tokenizer.h"

namespace kvc::tokenizer {

namespace {

size_t utf8_length(unsigned char c) { return c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1; }

// A symbol of the word being merged: a byte range [begin, begin + n), linked to its neighbours.
struct Symbol {
  size_t begin;
  size_t n;  // 0 once merged into its left neighbour
  int prev;
  int next;
};

// A candidate merge of symbols left and right (adjacent when it was queued).
struct Pair {
  int rank;
  int left;
  int right;
  size_t n;  // their combined length when queued: a stale pair no longer has it
  bool operator>(const Pair& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
};

}  // namespace

Result<BpeModel> BpeModel::create(const Vocabulary& v) {
  auto pre = PreTokenizer::create(v.pre);
  if (!pre.ok()) return pre.error();
  BpeModel m(std::move(*pre));
  m.ids_.reserve(v.tokens.size());
  for (size_t i = 0; i < v.tokens.size(); ++i) m.ids_.emplace(v.tokens[i], static_cast<int32_t>(i));
  m.ranks_.reserve(v.merges.size());
  for (size_t r = 0; r < v.merges.size(); ++r) {
    const std::string& merge = v.merges[r];
    const size_t space = merge.find(' ', 1);  // a leading space would be part of the left piece
    if (space == std::string::npos || space + 1 >= merge.size()) {
      return make_error(
          ErrorCode::invalid_file,
          "tokenizer: merge " + std::to_string(r) + " (tokenizer.ggml.merges) \"" + merge + "\" is not \"left right\"");
    }
    std::string key = merge;
    key[space] = '\n';
    m.ranks_.emplace(std::move(key), static_cast<int>(r));  // the first of duplicate merges wins
  }
  return m;
}

int32_t BpeModel::id_of(std::string_view piece) const {
  const auto it = ids_.find(piece);
  return it == ids_.end() ? -1 : it->second;
}

int BpeModel::rank_of(std::string_view left, std::string_view right) const {
  thread_local std::string key;
  key.assign(left).append(1, '\n').append(right);
  const auto it = ranks_.find(std::string_view(key));
  return it == ranks_.end() ? -1 : it->second;
}

void BpeModel::encode(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<std::string_view> words;
  pre_.split(text, words);
  std::string spelled;
  for (const std::string_view w : words) {
    spelled.clear();
    append_byte_level(w, spelled);
    encode_word(spelled, out);
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (pre_.ignore_merges()) {
    if (const int32_t id = id_of(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> symbols;
  for (size_t at = 0; at < word.size();) {
    const size_t n = std::min(utf8_length(static_cast<unsigned char>(word[at])), word.size() - at);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({at, n, index - 1, at + n < word.size() ? index + 1 : -1});
    at += n;
  }
  std::priority_queue<Pair, std::vector<Pair>, std::greater<>> queue;
  auto text_of = [&](const Symbol& s) { return word.substr(s.begin, s.n); };
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int rank = rank_of(text_of(symbols[static_cast<size_t>(left)]), text_of(symbols[static_cast<size_t>(right)]));
    if (rank >= 0)
      queue.push({rank, left, right, symbols[static_cast<size_t>(left)].n + symbols[static_cast<size_t>(right)].n});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) consider(i - 1, i);
  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Symbol& l = symbols[static_cast<size_t>(p.left)];
    Symbol& r = symbols[static_cast<size_t>(p.right)];
    // Stale: one side was merged away or grew since the pair was queued.
    if (l.n == 0 || r.n == 0 || l.next != p.right || l.n + r.n != p.n) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = p.left;
    consider(l.prev, p.left);
    consider(p.left, l.next);
  }
  for (const Symbol& s : symbols) {
    if (s.n == 0) continue;
    const std::string_view piece = text_of(s);
    if (const int32_t id = id_of(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (const char c : piece) {  // no token for it: its single bytes', where they exist
      if (const int32_t id = id_of(std::string_view(&c, 1)); id >= 0) out.push_back(id);
    }
  }
}

}  // namespace kvc::tokenizer
