package payloadstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// s3Store keeps each object under prefix/key in a bucket.
type s3Store struct {
	client   *s3.Client
	bucket   string
	prefix   string // "" or ends with "/"
	location string
}

func openS3(ctx context.Context, spec string) (*s3Store, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s=%s: %s", EnvVar, spec, fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(spec)
	if err != nil {
		return nil, bad("%v: want s3://bucket/prefix", err)
	}
	if u.User != nil {
		return nil, bad("credentials do not go in the spec: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	bucket := u.Host
	if bucket == "" {
		return nil, bad("no bucket: want s3://bucket/prefix")
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		if err := validKey(prefix); err != nil {
			return nil, bad("bad prefix %q: want slash-separated segments of [a-zA-Z0-9._-]", prefix)
		}
		prefix += "/"
	}
	var endpoint, region string
	pathStyle := -1 // unset
	q := u.Query()
	for k, vs := range q {
		v := vs[len(vs)-1]
		switch k {
		case "endpoint":
			if pu, err := url.Parse(v); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
				return nil, bad("?endpoint=%s: want an http:// or https:// URL", v)
			}
			endpoint = v
		case "region":
			region = v
		case "path_style":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, bad("?path_style=%s: want true or false", v)
			}
			pathStyle = 0
			if b {
				pathStyle = 1
			}
		default:
			return nil, bad("unknown option ?%s: the options are endpoint, region and path_style", k)
		}
	}

	var loadOpts []func(*awsconfig.LoadOptions) error
	if region != "" {
		loadOpts = append(loadOpts, awsconfig.WithRegion(region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, bad("loading the AWS configuration: %v", err)
	}
	if cfg.Region == "" {
		return nil, bad("no AWS region: set AWS_REGION (or add ?region=NAME)")
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		custom := o.BaseEndpoint != nil
		o.UsePathStyle = pathStyle == 1 || (pathStyle == -1 && custom)
		if custom {
			// S3-compatible servers differ in their support of the
			// default request checksums (aws-chunked trailers).
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
	})

	loc := "s3://" + bucket + "/" + strings.TrimSuffix(prefix, "/")
	lq := url.Values{}
	if endpoint != "" {
		lq.Set("endpoint", endpoint)
	}
	if region != "" {
		lq.Set("region", region)
	}
	if pathStyle != -1 {
		lq.Set("path_style", strconv.FormatBool(pathStyle == 1))
	}
	if len(lq) > 0 {
		loc += "?" + lq.Encode()
	}
	s := &s3Store{client: client, bucket: bucket, prefix: prefix, location: loc}

	// Fail at start, not at the first large payload, when the bucket is
	// missing or the server does not answer. A 403 may only mean the
	// credentials may not list the bucket, so it passes.
	hctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := client.HeadBucket(hctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil && httpStatus(err) != http.StatusForbidden {
		if isNotFound(err) {
			return nil, bad("bucket %q does not exist: create it, or fix the spec", bucket)
		}
		return nil, bad("checking bucket %q: %v (check AWS_REGION, the credentials and AWS_ENDPOINT_URL_S3)", bucket, err)
	}
	return s, nil
}

func (s *s3Store) Location() string { return s.location }

func (s *s3Store) Put(ctx context.Context, key string, data []byte) error {
	if err := validKey(key); err != nil {
		return err
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.prefix + key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		ContentType:   aws.String("application/octet-stream"),
	})
	if err != nil {
		return fmt.Errorf("payloadstore: put %s in %s: %w", key, s.location, err)
	}
	return nil
}

func (s *s3Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := validKey(key); err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if err != nil {
		if isNotFound(err) && !isNoSuchBucket(err) {
			return nil, fmt.Errorf("%w: %s in %s", ErrNotFound, key, s.location)
		}
		return nil, fmt.Errorf("payloadstore: get %s from %s: %w", key, s.location, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("payloadstore: get %s from %s: %w", key, s.location, err)
	}
	return b, nil
}

func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	var nsb *types.NoSuchBucket
	if errors.As(err, &nsk) || errors.As(err, &nf) || errors.As(err, &nsb) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchKey", "NotFound", "NoSuchBucket":
			return true
		}
	}
	return httpStatus(err) == http.StatusNotFound
}

func isNoSuchBucket(err error) bool {
	var nsb *types.NoSuchBucket
	var api smithy.APIError
	return errors.As(err, &nsb) || errors.As(err, &api) && api.ErrorCode() == "NoSuchBucket"
}

func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}
