#include "aes_ecb.h"

#include <openssl/evp.h>

#include <atomic>
#include <string>

namespace flurry::internal {
namespace {

// Each thread starts its search of the pool at its own slot, so threads rarely meet.
std::size_t home_slot() noexcept {
  static std::atomic<std::size_t> next{0};
  thread_local const std::size_t slot = next.fetch_add(1, std::memory_order_relaxed);
  return slot;
}

}  // namespace

Status AesEcb::init(AesEcb& aes, std::span<const std::uint8_t> key) {
  const EVP_CIPHER* cipher = nullptr;
  switch (key.size()) {
    case 16:
      cipher = EVP_aes_128_ecb();
      break;
    case 24:
      cipher = EVP_aes_192_ecb();
      break;
    case 32:
      cipher = EVP_aes_256_ecb();
      break;
    default:
      return InvalidArgument("an AES key has 16, 24 or 32 bytes, not " +
                             std::to_string(key.size()));
  }
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  if (ctx == nullptr) return Status(StatusCode::kInternal, "OpenSSL: EVP_CIPHER_CTX_new failed");
  if (EVP_EncryptInit_ex(ctx, cipher, nullptr, key.data(), nullptr) != 1 ||
      EVP_CIPHER_CTX_set_padding(ctx, 0) != 1) {
    EVP_CIPHER_CTX_free(ctx);
    return Status(StatusCode::kInternal, "OpenSSL: AES-ECB initialisation failed");
  }
  aes.master_ = ctx;
  aes.key_bits_ = static_cast<int>(key.size() * 8);
  return OkStatus();
}

AesEcb::~AesEcb() {
  for (Slot& s : slots_) EVP_CIPHER_CTX_free(s.ctx.exchange(nullptr));
  EVP_CIPHER_CTX_free(master_);
}

AesEcb::Lease AesEcb::lease() const noexcept {
  const std::size_t home = home_slot();
  for (std::size_t i = 0; i < kSlots; ++i) {
    const std::size_t slot = (home + i) % kSlots;
    if (slots_[slot].ctx.load(std::memory_order_relaxed) == nullptr) continue;
    if (EVP_CIPHER_CTX* ctx = slots_[slot].ctx.exchange(nullptr, std::memory_order_acquire)) {
      return Lease(this, ctx, slot);
    }
  }
  // The pool is empty (first use by this thread, or more concurrent callers than before): copy
  // the master context. The copy joins the pool when given back.
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  if (ctx != nullptr && EVP_CIPHER_CTX_copy(ctx, master_) != 1) {
    EVP_CIPHER_CTX_free(ctx);
    ctx = nullptr;
  }
  return Lease(this, ctx, home % kSlots);
}

void AesEcb::give_back(EVP_CIPHER_CTX* ctx, std::size_t slot) const noexcept {
  for (std::size_t i = 0; i < kSlots; ++i) {
    EVP_CIPHER_CTX* expected = nullptr;
    if (slots_[(slot + i) % kSlots].ctx.compare_exchange_strong(
            expected, ctx, std::memory_order_release, std::memory_order_relaxed)) {
      return;
    }
  }
  EVP_CIPHER_CTX_free(ctx);  // more contexts than slots: keep the pool bounded
}

AesEcb::Lease::~Lease() {
  if (ctx_ != nullptr) owner_->give_back(ctx_, slot_);
}

bool AesEcb::Lease::encrypt(const std::uint8_t* in, std::uint8_t* out) const noexcept {
  // EVP_Cipher is EVP's lowest-overhead call; for a block cipher without a custom cipher
  // function it returns the number of bytes written (OpenSSL 3) or 1 (1.1), and <= 0 on failure.
  return EVP_Cipher(ctx_, out, in, 16) > 0;
}

}  // namespace flurry::internal
