package observe

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenReadsGzipByItsContent: a gzip'd log whose name does not end in .gz (a rotation copied
// under another name, logrotate's compressext, a file saved from a pipe) is read through gzip,
// as stdin starting with gzip's magic is (internal/cli). Before, it was read as text: its 3
// attempts were 2 skipped lines of binary, and beside other files the report passed without
// them.
func TestOpenReadsGzipByItsContent(t *testing.T) {
	plain, err := os.ReadFile("testdata/envoy-default.log")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"envoy.log.1", "envoy.log.1.gz"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, gz(t, plain[:504]), 0o600); err != nil { // the first 3 lines
			t.Fatal(err)
		}
		fh, err := Open(path, func(n string) (io.ReadCloser, error) { return os.Open(n) })
		if err != nil {
			t.Fatal(err)
		}
		st, err := NewGrouper().Consume(fh, Source{Name: path}, DefaultMaxLine)
		fh.Close()
		if err != nil || st != (Stats{Lines: 3, Attempts: 3}) {
			t.Errorf("%s: %+v %v, want 3 lines, 3 attempts", name, st, err)
		}
	}
	// The kubelet's rotation being compressed (0.log.<time>.tmp, its lines still in 0.log.<time>)
	// is not decoded: read as it is, its lines are no access-log lines, never the same attempts
	// twice.
	path := filepath.Join(dir, "0.log.20261201-113839.tmp")
	if err := os.WriteFile(path, gz(t, plain[:504]), 0o600); err != nil {
		t.Fatal(err)
	}
	fh, err := Open(path, func(n string) (io.ReadCloser, error) { return os.Open(n) })
	if err != nil {
		t.Fatal(err)
	}
	st, err := NewGrouper().Consume(fh, Source{Name: path}, DefaultMaxLine)
	fh.Close()
	if err != nil || st.Attempts != 0 {
		t.Errorf("the kubelet's .tmp: %+v %v, want no attempt", st, err)
	}
	// A file too short for the magic, and an empty one, are read as they are.
	for _, body := range []string{"", "\x1f", "{\n"} {
		path := filepath.Join(dir, "short.log")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		fh, err := Open(path, func(n string) (io.ReadCloser, error) { return os.Open(n) })
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(fh)
		fh.Close()
		if err != nil || string(b) != body {
			t.Errorf("%q: read %q %v", body, b, err)
		}
	}
}
