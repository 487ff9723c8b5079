#include "libcrypto.h"

#include <dlfcn.h>

#include <mutex>
#include <string>
#include <type_traits>

namespace flurry::internal {

Result<const Libcrypto*> load_libcrypto() {
  static constexpr const char* kLibrary = "libcrypto.so.3";
  static Libcrypto lib;
  static Status status;
  static std::once_flag once;
  std::call_once(once, [] {
    const auto missing = [](const std::string& why) {
      return Status(StatusCode::kFailedPrecondition,
                    std::string("order numbers need OpenSSL's libcrypto (") + kLibrary +
                        ", Debian's package libssl3), " + why);
    };
    void* handle = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = ::dlerror();
      status = missing(std::string("which cannot be loaded: ") +
                       (error != nullptr ? error : "unknown error"));
      return;
    }
    const auto resolve = [handle, &missing](auto& slot, const char* name) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(::dlsym(handle, name));
      if (slot == nullptr && status.ok()) {
        status = missing(std::string("whose ") + kLibrary + " has no function " + name);
      }
    };
    resolve(lib.aes_128_ecb, "EVP_aes_128_ecb");
    resolve(lib.aes_192_ecb, "EVP_aes_192_ecb");
    resolve(lib.aes_256_ecb, "EVP_aes_256_ecb");
    resolve(lib.ctx_new, "EVP_CIPHER_CTX_new");
    resolve(lib.ctx_free, "EVP_CIPHER_CTX_free");
    resolve(lib.ctx_copy, "EVP_CIPHER_CTX_copy");
    resolve(lib.ctx_set_padding, "EVP_CIPHER_CTX_set_padding");
    resolve(lib.encrypt_init, "EVP_EncryptInit_ex");
    resolve(lib.cipher, "EVP_Cipher");
  });
  if (!status.ok()) return status;
  return &lib;
}

}  // namespace flurry::internal
