# The ECDSA signer (ecdsa-signer.c), built by `npm ci` (the root package's install script) with the
# OpenSSL headers that come with Node's own headers: it links against the OpenSSL inside the node binary.
{
  "targets": [
    {
      "target_name": "ecdsa_signer",
      "sources": ["ecdsa-signer.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"]
    }
  ]
}
