package storm

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCheckAccessLogDir: --access-logs naming a directory that holds an earlier run's logs is
// refused: the proxies append, and observe would count both runs' attempts (the arms' keys are
// the same every run).
func TestCheckAccessLogDir(t *testing.T) {
	dir := t.TempDir()
	if err := checkAccessLogDir(dir); err != nil {
		t.Fatalf("empty directory: %v", err)
	}
	if err := checkAccessLogDir(filepath.Join(dir, "new")); err != nil {
		t.Fatalf("a directory to create: %v", err)
	}
	old := AccessLogPaths(dir, ArmRetrycap)[1]
	if err := os.MkdirAll(filepath.Dir(old), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "storm: --access-logs " + dir + ": holds retrycap/" + filepath.Base(old) + " from an earlier run (the proxies append to it: observe would count both runs' attempts); give an empty or new directory"
	if err := checkAccessLogDir(dir); err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}
