// The result documents the S3 client reads (openlake/s3/client.h): a multipart upload's
// InitiateMultipartUploadResult and CompleteMultipartUploadResult, and ListObjectsV2's
// ListBucketResult. Read through pugixml like the server's documents (s3/api/xml.h); a body
// that is not the expected document is Internal (the server answered something malformed).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "openlake/s3/client.h"

namespace openlake::s3 {

// <InitiateMultipartUploadResult><UploadId/>...: the upload id.
absl::StatusOr<std::string> ParseInitiateResult(std::string_view body);
// <CompleteMultipartUploadResult><ETag/>...: the ETag without quotes.
absl::StatusOr<std::string> ParseCompleteResult(std::string_view body);
// <ListBucketResult><Contents><Key/><Size/><ETag/></Contents>...<CommonPrefixes><Prefix/>
// </CommonPrefixes>...<IsTruncated/><NextContinuationToken/></ListBucketResult>. Keys come
// as written (this client never asks for encoding-type=url).
absl::StatusOr<ListPage> ParseListResult(std::string_view body);

// An ETag without its surrounding quotes.
std::string_view Unquoted(std::string_view etag);

}  // namespace openlake::s3
