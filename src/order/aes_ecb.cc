#include "aes_ecb.h"

#include <openssl/evp.h>

#include <atomic>
#include <string>

#include "libcrypto.h"

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
  Result<const Libcrypto*> loaded = load_libcrypto();
  if (!loaded.ok()) return loaded.status();
  const Libcrypto& crypto = **loaded;
  const EVP_CIPHER* cipher = nullptr;
  switch (key.size()) {
    case 16:
      cipher = crypto.aes_128_ecb();
      break;
    case 24:
      cipher = crypto.aes_192_ecb();
      break;
    case 32:
      cipher = crypto.aes_256_ecb();
      break;
    default:
      return InvalidArgument("an AES key has 16, 24 or 32 bytes, not " +
                             std::to_string(key.size()));
  }
  EVP_CIPHER_CTX* ctx = crypto.ctx_new();
  if (ctx == nullptr) return Status(StatusCode::kInternal, "OpenSSL: EVP_CIPHER_CTX_new failed");
  if (crypto.encrypt_init(ctx, cipher, nullptr, key.data(), nullptr) != 1 ||
      crypto.ctx_set_padding(ctx, 0) != 1) {
    crypto.ctx_free(ctx);
    return Status(StatusCode::kInternal, "OpenSSL: AES-ECB initialisation failed");
  }
  aes.crypto_ = &crypto;
  aes.master_ = ctx;
  aes.key_bits_ = static_cast<int>(key.size() * 8);
  return OkStatus();
}

AesEcb::~AesEcb() {
  if (crypto_ == nullptr) return;  // never initialised: no context
  for (Slot& s : slots_) crypto_->ctx_free(s.ctx.exchange(nullptr));
  crypto_->ctx_free(master_);
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
  if (crypto_ == nullptr) return Lease(this, nullptr, 0);  // never initialised
  EVP_CIPHER_CTX* ctx = crypto_->ctx_new();
  if (ctx != nullptr && crypto_->ctx_copy(ctx, master_) != 1) {
    crypto_->ctx_free(ctx);
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
  crypto_->ctx_free(ctx);  // more contexts than slots: keep the pool bounded
}

AesEcb::Lease::~Lease() {
  if (ctx_ != nullptr) owner_->give_back(ctx_, slot_);
}

bool AesEcb::Lease::encrypt(const std::uint8_t* in, std::uint8_t* out) const noexcept {
  // EVP_Cipher is EVP's lowest-overhead call; for a block cipher without a custom cipher
  // function it returns the number of bytes written (OpenSSL 3) or 1 (1.1), and <= 0 on failure.
  return owner_->crypto_->cipher(ctx_, out, in, 16) > 0;
}

}  // namespace flurry::internal
