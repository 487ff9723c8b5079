// Internal: AES single-block encryption through OpenSSL's EVP interface (AES-ECB, no padding),
// with a small pool of cipher contexts per key so that concurrent callers never share one
// EVP_CIPHER_CTX and steady state allocates nothing. libcrypto is loaded by the first init()
// (libcrypto.h), not linked.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "flurry/status.h"

typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;

namespace flurry::internal {

struct Libcrypto;  // libcrypto.h

using Block = std::array<std::uint8_t, 16>;

class AesEcb {
 public:
  // INVALID_ARGUMENT for a key of another size than 16, 24 or 32 bytes (the message names the
  // size, never the bytes); INTERNAL when OpenSSL fails. The key is not retained.
  [[nodiscard]] static Status init(AesEcb& aes, std::span<const std::uint8_t> key);

  AesEcb() = default;
  AesEcb(const AesEcb&) = delete;
  AesEcb& operator=(const AesEcb&) = delete;
  ~AesEcb();  // frees every context (OpenSSL cleanses their key schedules)

  [[nodiscard]] int key_bits() const noexcept { return key_bits_; }

  // A context borrowed from the pool for one thread's exclusive use; returned on destruction.
  class Lease {
   public:
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();
    [[nodiscard]] bool ok() const noexcept { return ctx_ != nullptr; }
    // out = AES_K(in). False when OpenSSL fails. `in` and `out` may alias.
    [[nodiscard]] bool encrypt(const std::uint8_t* in, std::uint8_t* out) const noexcept;

   private:
    friend class AesEcb;
    Lease(const AesEcb* owner, EVP_CIPHER_CTX* ctx, std::size_t slot) noexcept
        : owner_(owner), ctx_(ctx), slot_(slot) {}
    const AesEcb* owner_;
    EVP_CIPHER_CTX* ctx_;
    std::size_t slot_;
  };

  // A context for this thread; !ok() only when OpenSSL cannot allocate a new one.
  [[nodiscard]] Lease lease() const noexcept;

 private:
  static constexpr std::size_t kSlots = 16;
  struct alignas(64) Slot {
    mutable std::atomic<EVP_CIPHER_CTX*> ctx{nullptr};
  };
  void give_back(EVP_CIPHER_CTX* ctx, std::size_t slot) const noexcept;

  const Libcrypto* crypto_ = nullptr;  // set by init(): libcrypto is loaded on first use
  EVP_CIPHER_CTX* master_ = nullptr;   // only ever copied from
  int key_bits_ = 0;
  std::array<Slot, kSlots> slots_{};
};

}  // namespace flurry::internal
