package payloadstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// fileStore keeps each object in a file under dir; a key's segments are
// subdirectories.
type fileStore struct {
	dir string // absolute
}

func openFile(spec string) (*fileStore, error) {
	dir := strings.TrimPrefix(spec, "file:")
	if strings.HasPrefix(dir, "//") { // file:///abs/dir
		dir = strings.TrimPrefix(dir, "//")
		if !strings.HasPrefix(dir, "/") {
			return nil, fmt.Errorf("%s=%s: file://host/... is not supported: write file:<dir> or file:///abs/dir", EnvVar, spec)
		}
	}
	if dir == "" {
		return nil, fmt.Errorf("%s=%s: no directory: write file:<dir>, e.g. %s", EnvVar, spec, DefaultSpec)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", EnvVar, spec, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("%s=%s: cannot create the directory: %w (pick a writable directory)", EnvVar, spec, err)
	}
	return &fileStore{dir: abs}, nil
}

func (s *fileStore) Location() string { return "file:" + s.dir }

func (s *fileStore) path(key string) (string, error) {
	if err := validKey(key); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, filepath.FromSlash(key)), nil
}

// Put writes to a temporary file in the key's directory, syncs it and
// renames it over the key: readers see the old bytes or the new, never a
// part, and concurrent writers of one key each win whole.
func (s *fileStore) Put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	path, err := s.path(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("payloadstore: put %s in %s: %w", key, s.Location(), err)
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("payloadstore: put %s in %s: %w", key, s.Location(), err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("payloadstore: put %s in %s: %w", key, s.Location(), err)
	}
	return nil
}

func (s *fileStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path, err := s.path(key)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) {
			return nil, fmt.Errorf("%w: %s in %s", ErrNotFound, key, s.Location())
		}
		return nil, fmt.Errorf("payloadstore: get %s from %s: %w", key, s.Location(), err)
	}
	return b, nil
}
