// OpenSSL's libcrypto, loaded when order numbers are first set up instead of when the process
// starts: about 1.4 MB of an idle server's resident memory, for a feature that is off unless
// order-number keys are configured. AesEcb (aes_ecb.h) calls AES through this table; nothing else
// in flurry calls libcrypto.
#pragma once

#include <openssl/evp.h>

#include "flurry/status.h"

namespace flurry::internal {

// The libcrypto functions AesEcb calls, resolved from libcrypto.so.3.
struct Libcrypto {
  decltype(&::EVP_aes_128_ecb) aes_128_ecb = nullptr;
  decltype(&::EVP_aes_192_ecb) aes_192_ecb = nullptr;
  decltype(&::EVP_aes_256_ecb) aes_256_ecb = nullptr;
  decltype(&::EVP_CIPHER_CTX_new) ctx_new = nullptr;
  decltype(&::EVP_CIPHER_CTX_free) ctx_free = nullptr;
  decltype(&::EVP_CIPHER_CTX_copy) ctx_copy = nullptr;
  decltype(&::EVP_CIPHER_CTX_set_padding) ctx_set_padding = nullptr;
  decltype(&::EVP_EncryptInit_ex) encrypt_init = nullptr;
  decltype(&::EVP_Cipher) cipher = nullptr;
};

// libcrypto's functions, loading libcrypto.so.3 at the first call (thread-safe; never unloaded).
// FAILED_PRECONDITION naming the library, the loader's error and the package to install when it
// cannot be loaded.
[[nodiscard]] Result<const Libcrypto*> load_libcrypto();

}  // namespace flurry::internal
