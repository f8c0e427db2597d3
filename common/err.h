/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The project's one error table (STYLE.md 3). Each row: name, the S3 error
 * code a client sees, the HTTP status, and a default message. Rows in the
 * first block are codes clients see; rows in the second block are internal
 * causes, each naming the S3 code it surfaces as. Logs keep the cause.
 * Foreign codes (RAFT_*, RocksDB errptr, errno) are translated into these in
 * exactly one place per module.
 */
#ifndef MG_COMMON_ERR_H
#define MG_COMMON_ERR_H

/* X(name, s3_code, http_status, message) */
#define MG_ERR_TABLE(X)                                                                            \
    X(MG_OK, "OK", 200, "success")                                                                 \
    /* --- client-visible --- */                                                                   \
    X(MG_EACCESSDENIED, "AccessDenied", 403, "Access Denied")                                      \
    X(MG_ESIGNATURE, "SignatureDoesNotMatch", 403,                                                 \
      "The request signature we calculated does not match the signature you provided. Check "     \
      "your key and signing method.")                                                              \
    X(MG_EINVALIDACCESSKEY, "InvalidAccessKeyId", 403,                                             \
      "The AWS Access Key Id you provided does not exist in our records.")                         \
    X(MG_ESKEWED, "RequestTimeTooSkewed", 403,                                                     \
      "The difference between the request time and the current time is too large.")               \
    X(MG_EEXPIRED, "AccessDenied", 403, "Request has expired")                                     \
    X(MG_EAUTHHEADER, "AuthorizationHeaderMalformed", 400,                                         \
      "The authorization header is malformed.")                                                    \
    X(MG_EAUTHQUERY, "AuthorizationQueryParametersError", 400,                                     \
      "Error parsing the X-Amz-Credential parameter.")                                             \
    X(MG_EWRONGREGION, "AuthorizationHeaderMalformed", 400,                                        \
      "The authorization header is malformed; the region is wrong.")                               \
    X(MG_EINVALIDURI, "InvalidURI", 400,                                                           \
      "Couldn't parse the specified URI.")                                                         \
    X(MG_EREQTIMEOUT, "RequestTimeout", 400,                                                       \
      "Your socket connection to the server was not read from or written to within the "           \
      "timeout period.")                                                                           \
    X(MG_ECONTENTSHA, "XAmzContentSHA256Mismatch", 400,                                            \
      "The provided 'x-amz-content-sha256' header does not match what was computed.")             \
    X(MG_EMISSINGSECHDR, "MissingSecurityHeader", 400,                                             \
      "Your request was missing a required header.")                                               \
    X(MG_ENOSUCHBUCKET, "NoSuchBucket", 404, "The specified bucket does not exist")                \
    X(MG_ENOSUCHKEY, "NoSuchKey", 404, "The specified key does not exist.")                        \
    X(MG_ENOSUCHUPLOAD, "NoSuchUpload", 404,                                                       \
      "The specified multipart upload does not exist. The upload ID may be invalid, or the "       \
      "upload may have been aborted or completed.")                                                \
    X(MG_ENOSUCHTAGSET, "NoSuchTagSet", 404, "The TagSet does not exist")                          \
    X(MG_ENOSUCHLIFECYCLE, "NoSuchLifecycleConfiguration", 404,                                    \
      "The lifecycle configuration does not exist")                                                \
    X(MG_ENOSUCHPOLICY, "NoSuchBucketPolicy", 404, "The bucket policy does not exist")             \
    X(MG_ENOSUCHCORS, "NoSuchCORSConfiguration", 404, "The CORS configuration does not exist")     \
    X(MG_EBUCKETEXISTS, "BucketAlreadyExists", 409,                                                \
      "The requested bucket name is not available. The bucket namespace is shared by all users "   \
      "of the system. Please select a different name and try again.")                              \
    X(MG_EBUCKETOWNED, "BucketAlreadyOwnedByYou", 409,                                             \
      "Your previous request to create the named bucket succeeded and you already own it.")        \
    X(MG_EBUCKETNOTEMPTY, "BucketNotEmpty", 409, "The bucket you tried to delete is not empty")    \
    X(MG_EINVALIDBUCKETNAME, "InvalidBucketName", 400, "The specified bucket is not valid.")       \
    X(MG_ERESERVEDBUCKET, "InvalidBucketName", 400,                                                \
      "The bucket names health and metrics are reserved for the endpoints /health and "            \
      "/metrics.")                                                                                 \
    X(MG_EKEYTOOLONG, "KeyTooLongError", 400, "Your key is too long")                              \
    X(MG_EINVALIDARGUMENT, "InvalidArgument", 400, "Invalid Argument")                             \
    X(MG_EINVALIDREQUEST, "InvalidRequest", 400, "Invalid Request")                                \
    X(MG_EINVALIDRANGE, "InvalidRange", 416, "The requested range is not satisfiable")             \
    X(MG_EINVALIDPARTNUMBER, "InvalidPartNumber", 416,                                             \
      "The requested partnumber is not satisfiable")                                               \
    X(MG_EMETATOOLARGE, "MetadataTooLarge", 400,                                                   \
      "Your metadata headers exceed the maximum allowed metadata size.")                           \
    X(MG_EBADREQUEST, "BadRequest", 400, "Bad Request")                                            \
    X(MG_EHEADERSTOOLARGE, "RequestHeaderSectionTooLarge", 400,                                    \
      "Your request header section exceeds the maximum allowed size.")                             \
    X(MG_EEXPECTATION, "ExpectationFailed", 417,                                                   \
      "The expectation given in the Expect header cannot be met: only 100-continue is "            \
      "supported.")                                                                                \
    X(MG_EPRECONDITION, "PreconditionFailed", 412,                                                 \
      "At least one of the pre-conditions you specified did not hold")                             \
    X(MG_ENOTMODIFIED, "NotModified", 304, "Not Modified")                                         \
    X(MG_ECONDCONFLICT, "ConditionalRequestConflict", 409,                                         \
      "A conflicting conditional operation is currently in progress against this resource.")      \
    X(MG_EBADDIGEST, "BadDigest", 400,                                                             \
      "The Content-MD5 or checksum you specified did not match what we received.")                \
    X(MG_EINVALIDDIGEST, "InvalidDigest", 400, "The Content-MD5 you specified is not valid.")      \
    X(MG_EENTITYTOOSMALL, "EntityTooSmall", 400,                                                   \
      "Your proposed upload is smaller than the minimum allowed object size.")                     \
    X(MG_EENTITYTOOLARGE, "EntityTooLarge", 400,                                                   \
      "Your proposed upload exceeds the maximum allowed object size.")                             \
    X(MG_EINCOMPLETEBODY, "IncompleteBody", 400,                                                   \
      "You did not provide the number of bytes specified by the Content-Length HTTP header.")     \
    X(MG_EMISSINGLENGTH, "MissingContentLength", 411,                                              \
      "You must provide the Content-Length HTTP header.")                                          \
    X(MG_EINVALIDPART, "InvalidPart", 400,                                                         \
      "One or more of the specified parts could not be found. The part may not have been "         \
      "uploaded, or the specified entity tag may not match the part's entity tag.")                \
    X(MG_EINVALIDPARTORDER, "InvalidPartOrder", 400,                                               \
      "The list of parts was not in ascending order. Parts must be ordered by part number.")       \
    X(MG_EMALFORMEDXML, "MalformedXML", 400,                                                       \
      "The XML you provided was not well-formed or did not validate against our published "        \
      "schema.")                                                                                   \
    X(MG_EINVALIDTAG, "InvalidTag", 400, "The tag provided was not a valid tag.")                  \
    X(MG_EMETHODNOTALLOWED, "MethodNotAllowed", 405,                                               \
      "The specified method is not allowed against this resource.")                               \
    X(MG_ENOTIMPLEMENTED, "NotImplemented", 501,                                                   \
      "A header you provided implies functionality that is not implemented.")                     \
    X(MG_ESLOWDOWN, "SlowDown", 503, "Please reduce your request rate.")                           \
    X(MG_EINTERNAL, "InternalError", 500,                                                          \
      "We encountered an internal error. Please try again.")                                       \
    /* --- internal causes (surface as the S3 code named) --- */                                   \
    X(MG_ENOTFOUND, "NoSuchKey", 404, "not found")                                                 \
    X(MG_ENOTLEADER, "ServiceUnavailable", 503, "not the leader")                                  \
    X(MG_ESHUTDOWN, "ServiceUnavailable", 503, "shutting down")                                    \
    X(MG_EIO, "InternalError", 500, "I/O error")                                                   \
    X(MG_ENOSPC, "InsufficientStorage", 507, "no space left on device")                            \
    X(MG_ECORRUPT, "InternalError", 500, "stored data failed its checksum")                        \
    X(MG_ENOMEM, "InternalError", 500, "out of memory")                                            \
    X(MG_EBUSY, "SlowDown", 503, "resource busy, retry")                                           \
    X(MG_ECONFIG, "InternalError", 500, "invalid configuration")                                   \
    X(MG_ETIMEOUT, "ServiceUnavailable", 503, "timed out")

enum mg_err {
#define MG__ERR_ENUM(name, code, status, msg) name,
    MG_ERR_TABLE(MG__ERR_ENUM)
#undef MG__ERR_ENUM
        MG_ERR__COUNT
};

/* S3 error code string ("NoSuchKey") for rv; never NULL. */
const char *mg_err_s3code(int rv);
/* HTTP status for rv (404 for MG_ENOSUCHKEY). */
int mg_err_status(int rv);
/* Default message for rv. */
const char *mg_err_message(int rv);
/* Enum name ("MG_ENOSUCHKEY"), for logs. */
const char *mg_err_name(int rv);
/* Translate an errno value at the syscall site: ENOSPC/EDQUOT -> MG_ENOSPC, ENOMEM -> MG_ENOMEM,
 * anything else -> MG_EIO. */
int mg_err_from_errno(int e);

#endif
