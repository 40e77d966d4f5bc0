package storm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without --proxy-binary the lab finds retrycap-proxy on PATH, else runs its own executable as
// the proxy, else (outside the repository) says what to install.
func TestFindProxy(t *testing.T) {
	onPath := t.TempDir()
	fake := filepath.Join(onPath, ProxyName)
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", onPath)
	t.Chdir(t.TempDir()) // outside the repository
	if got, err := findProxy(t.TempDir()); err != nil || got != fake {
		t.Fatalf("findProxy with %s on PATH = %q, %v", ProxyName, got, err)
	}

	t.Setenv("PATH", t.TempDir())
	SelfProxy = true
	t.Cleanup(func() { SelfProxy = false })
	dir := t.TempDir()
	got, err := findProxy(dir)
	exe, _ := os.Executable()
	if target, lerr := os.Readlink(got); err != nil || got != filepath.Join(dir, ProxyName) || lerr != nil || target != exe {
		t.Fatalf("findProxy as its own proxy = %q (-> %q, %v), %v; want a link to %s", got, target, lerr, err, exe)
	}

	SelfProxy = false
	_, err = findProxy(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "go install github.com/retrycap/retrycap/cmd/retrycap-proxy@latest") || !strings.Contains(err.Error(), "--proxy-binary") {
		t.Fatalf("findProxy with nothing to find: %v", err)
	}
}
