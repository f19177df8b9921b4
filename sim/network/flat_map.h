// An open-addressing hash map from uint64 keys to uint32 values (linear
// probing, backward-shift deletion): lookups and inserts without allocating
// once it has grown to its peak size. Iteration order is never used, so the
// hash cannot leak into results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lacuna::network {

class FlatMap {
 public:
  static constexpr uint32_t kMissing = UINT32_MAX;

  FlatMap() { rehash(64); }

  void clear() {
    for (Slot& s : slots_) s.used = false;
    size_ = 0;
  }
  size_t size() const { return size_; }

  uint32_t find(uint64_t key) const {
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (!s.used) return kMissing;
      if (s.key == key) return s.value;
    }
  }

  // Inserts or overwrites.
  void put(uint64_t key, uint32_t value) {
    if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.size() * 2);
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used) {
        s = Slot{key, value, true};
        ++size_;
        return;
      }
      if (s.key == key) {
        s.value = value;
        return;
      }
    }
  }

  // Removes the key if present.
  void erase(uint64_t key) {
    size_t i = home(key);
    for (;; i = (i + 1) & mask_) {
      if (!slots_[i].used) return;
      if (slots_[i].key == key) break;
    }
    // Shift later members of the probe run back over the hole.
    size_t hole = i;
    for (size_t j = (hole + 1) & mask_; slots_[j].used; j = (j + 1) & mask_) {
      const size_t h = home(slots_[j].key);
      // Move j into the hole unless its home lies cyclically in (hole, j].
      const bool stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
      if (!stays) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].used = false;
    --size_;
  }

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t value = 0;
    bool used = false;
  };

  size_t home(uint64_t key) const {
    // splitmix64 finaliser
    key ^= key >> 30;
    key *= 0xbf58476d1ce4e5b9ULL;
    key ^= key >> 27;
    key *= 0x94d049bb133111ebULL;
    key ^= key >> 31;
    return static_cast<size_t>(key) & mask_;
  }

  void rehash(size_t capacity) {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    size_ = 0;
    for (const Slot& s : old) {
      if (s.used) put(s.key, s.value);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace lacuna::network
