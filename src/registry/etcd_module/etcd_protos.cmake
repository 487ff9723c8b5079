# cmake -P: copies etcd's protocol definitions, as Debian ships them (golang-etcd-server-dev), into
# the build tree for protoc, without what only Go's generator understands:
#   - the gogoproto import and every (gogoproto.*) option (file options and [(gogoproto.x) = y]
#     field options);
#   - google/api/annotations.proto and the `option (google.api.http) = { ... };` blocks (etcd's
#     JSON gateway, which flurry does not use).
# The imports of etcd's own files ("etcd/mvcc/mvccpb/kv.proto", "etcd/auth/authpb/auth.proto") are
# rewritten to the layout written here: OUT/etcd/{etcdserverpb/rpc,mvccpb/kv,authpb/auth}.proto.
# Nothing is downloaded. Usage: cmake -DSRC=<go.etcd.io/etcd> -DOUT=<dir> -P etcd_protos.cmake
if(NOT SRC OR NOT OUT)
  message(FATAL_ERROR "etcd_protos.cmake: give -DSRC=<etcd's Go source> and -DOUT=<directory>")
endif()

function(strip_proto from to)
  if(NOT EXISTS "${SRC}/${from}")
    message(FATAL_ERROR "etcd_protos.cmake: ${SRC}/${from} is missing (install golang-etcd-server-dev)")
  endif()
  file(READ "${SRC}/${from}" text)
  # The gateway's HTTP mappings: `option (google.api.http) = { ... };`, whose body may hold
  # `additional_bindings { ... }` blocks (one level of nesting).
  string(REGEX REPLACE
         "option[ \t]*\\(google\\.api\\.http\\)[ \t]*=[ \t]*{([^{}]*{[^{}]*})*[^{}]*}[ \t]*;" ""
         text "${text}")
  string(REGEX REPLACE "import[ \t]+\"google/api/annotations\\.proto\"[ \t]*;" "" text "${text}")
  string(REGEX REPLACE "import[ \t]+\"gogoproto/gogo\\.proto\"[ \t]*;" "" text "${text}")
  # File options: option (gogoproto.x) = y;
  string(REGEX REPLACE "option[ \t]*\\(gogoproto\\.[a-z_]+\\)[ \t]*=[ \t]*[a-z]+[ \t]*;" "" text "${text}")
  # Field options: [(gogoproto.x) = y] or [(gogoproto.x) = y, (gogoproto.z) = "w"].
  string(REGEX REPLACE "[ \t]*\\[[ \t]*\\(gogoproto\\.[^]]*\\]" "" text "${text}")
  string(REPLACE "\"etcd/mvcc/mvccpb/kv.proto\"" "\"etcd/mvccpb/kv.proto\"" text "${text}")
  string(REPLACE "\"etcd/auth/authpb/auth.proto\"" "\"etcd/authpb/auth.proto\"" text "${text}")
  if(text MATCHES "gogoproto|google\\.api")
    message(FATAL_ERROR "etcd_protos.cmake: ${from} still refers to gogoproto or google.api after stripping")
  endif()
  # Written only when changed, so that protoc does not run again for nothing.
  set(target "${OUT}/${to}")
  if(EXISTS "${target}")
    file(READ "${target}" old)
    if(old STREQUAL text)
      return()
    endif()
  endif()
  file(WRITE "${target}" "${text}")
endfunction()

strip_proto(etcdserver/etcdserverpb/rpc.proto etcd/etcdserverpb/rpc.proto)
strip_proto(mvcc/mvccpb/kv.proto etcd/mvccpb/kv.proto)
strip_proto(auth/authpb/auth.proto etcd/authpb/auth.proto)
