package payloadstore

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// EnvVar names the variable that picks the store (flag --payload-store).
const EnvVar = "EVE_PAYLOAD_STORE"

// DefaultSpec is the store used when EnvVar is unset: .eve/payloads under
// the process's working directory, inside the dev command's default state
// dir (.eve/, which also holds the dev server's database).
const DefaultSpec = "file:.eve/payloads"

// Open opens the store a spec names:
//
//   - file:<dir> keeps objects as files under dir (relative to the working
//     directory, or absolute; file:///abs/dir works too), creating it. Every
//     process must see the same directory.
//   - s3://bucket/prefix keeps objects in an S3 bucket (which must exist),
//     with the standard AWS variables: AWS_REGION, AWS_ACCESS_KEY_ID,
//     AWS_SECRET_ACCESS_KEY (or a profile, SSO, instance roles ...), and
//     AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL for S3-compatible servers such
//     as MinIO (path-style addressing is used with a custom endpoint). Query
//     options: ?endpoint=URL, ?region=NAME, ?path_style=true|false.
//
// The store's Location is a spec Open accepts.
func Open(ctx context.Context, spec string) (Store, error) {
	switch {
	case strings.HasPrefix(spec, "file:"):
		return openFile(spec)
	case strings.HasPrefix(spec, "s3://"):
		return openS3(ctx, spec)
	case spec == "":
		return nil, fmt.Errorf("%s is empty: want file:<dir> or s3://bucket/prefix (default %s)", EnvVar, DefaultSpec)
	}
	return nil, fmt.Errorf("%s=%s: unknown kind of store: want file:<dir> or s3://bucket/prefix", EnvVar, spec)
}

// FromEnv opens the store EnvVar names, or DefaultSpec when it is unset.
func FromEnv(ctx context.Context) (Store, error) {
	spec := os.Getenv(EnvVar)
	if spec == "" {
		spec = DefaultSpec
	}
	return Open(ctx, spec)
}

// validKey reports why key is not a valid key, or nil: keys are
// slash-separated, non-empty segments of [a-zA-Z0-9._-], none "." or "..".
func validKey(key string) error {
	if key == "" {
		return fmt.Errorf("payloadstore: empty key")
	}
	if len(key) > 900 {
		return fmt.Errorf("payloadstore: key %.40q... is %d bytes long: at most 900", key, len(key))
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("payloadstore: key %q has an empty, \".\" or \"..\" segment", key)
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return fmt.Errorf("payloadstore: key %q has the character %q: keys are slash-separated segments of [a-zA-Z0-9._-]", key, c)
			}
		}
	}
	return nil
}
