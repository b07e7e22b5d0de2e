// File: openlake/s3/credential.h
//
// An S3 access key pair: what the S3 server accepts (S3ServerOptions::credentials) and what the
// client signs with (ClientOptions::credential).
//
//   s3::Credential key{"AKIAEXAMPLE", "secret"};
#pragma once

#include <string>

namespace openlake::s3 {

struct Credential {
  std::string access_key;
  std::string secret_key;
  // The user's name in answers (ListBuckets' and ACLs' DisplayName); the access key when empty.
  std::string display_name;
};

}  // namespace openlake::s3
