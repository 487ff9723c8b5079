// Internal: the HTTP/1.1 messages of flurry's one client exchange (tls/http_client.h), shared with
// the TLS module (tls/module_api.h), which may use only header-defined types. Every user compiles
// Beast with BOOST_BEAST_USE_STD_STRING_VIEW and BOOST_ASIO_NO_DEPRECATED (flurry::tls's public
// definitions), so that these types are the same on both sides of the module boundary.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

namespace flurry::tls {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;

}  // namespace flurry::tls
