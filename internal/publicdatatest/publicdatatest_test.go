package publicdatatest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Dapr's module, also what internal/mesh/crds reads: cached once any mesh test ran.
const (
	daprModule  = "github.com/dapr/dapr"
	daprVersion = "v1.14.0"
	daprSum     = "h1:SIQsNX1kH31JRDIS4k8IZ6eomM/BAcOP844PhQIT+BQ="
	daprCRD     = "charts/dapr/crds/resiliency.yaml"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAssemble: the case's own files (a subdirectory too) and the listed module file, byte for
// byte the module's, and not the list itself.
func TestAssemble(t *testing.T) {
	src := filepath.Join(t.TempDir(), "case")
	write(t, filepath.Join(src, ListFile), "# comment\n\n"+daprModule+"@"+daprVersion+" "+daprSum+" "+daprCRD+" resiliency.yaml\n")
	write(t, filepath.Join(src, "kustomization.yaml"), "resources: [resiliency.yaml]\n")
	write(t, filepath.Join(src, "base", "app.yaml"), "kind: Deployment\n")
	dst := Dir(t, src)
	if filepath.Base(dst) != "case" || dst == src {
		t.Fatalf("Dir = %s, want a new directory named case", dst)
	}
	var got []string
	err := filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dst, p)
			got = append(got, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"base/app.yaml", "kustomization.yaml", "resiliency.yaml"}; !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	m, err := Download(daprModule, daprVersion, daprSum)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(m.Dir, daprCRD))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dst, "resiliency.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != string(want) || !strings.Contains(string(data), "name: resiliencies.dapr.io") {
		t.Fatalf("resiliency.yaml is not the module's file (%d bytes, want %d)", len(data), len(want))
	}
	if Dir(t, filepath.Join(dst, "base")) != filepath.Join(dst, "base") {
		t.Error("a directory without a list is not used as is")
	}
}

// TestRefused: every way a case can fail to read what it says is an error naming the file, the
// line and the value; none is a skip.
func TestRefused(t *testing.T) {
	line := daprModule + "@" + daprVersion + " " + daprSum + " " + daprCRD + " resiliency.yaml"
	for _, tc := range []struct {
		name, list, own, want string
	}{
		{"three fields", daprModule + "@" + daprVersion + " " + daprSum + " " + daprCRD + "\n", "",
			`from-modules.txt:1: "github.com/dapr/dapr@v1.14.0 h1:SIQsNX1kH31JRDIS4k8IZ6eomM/BAcOP844PhQIT+BQ= charts/dapr/crds/resiliency.yaml": want MODULE@VERSION H1SUM PATH-IN-MODULE NAME`},
		{"no version", "# x\n" + daprModule + " " + daprSum + " " + daprCRD + " r.yaml\n", "", "from-modules.txt:2: "},
		{"no hash", daprModule + "@" + daprVersion + " " + daprCRD + " a r.yaml\n", "", "want MODULE@VERSION H1SUM"},
		{"a path as name", daprModule + "@" + daprVersion + " " + daprSum + " " + daprCRD + " sub/r.yaml\n", "", `name "sub/r.yaml": want a plain file name`},
		{"empty", "# nothing\n", "", "from-modules.txt: no module file listed"},
		{"a name the case also has", line + "\n", "resiliency.yaml", "from-modules.txt:1: resiliency.yaml is also a file of "},
		{"another hash", daprModule + "@" + daprVersion + " h1:AAAA= " + daprCRD + " r.yaml\n", "",
			"github.com/dapr/dapr@v1.14.0: the module's hash is h1:SIQsNX1kH31JRDIS4k8IZ6eomM/BAcOP844PhQIT+BQ=, the case was written from h1:AAAA=: its expected output was derived from other bytes"},
		{"no such path", daprModule + "@" + daprVersion + " " + daprSum + " charts/none.yaml r.yaml\n", "", "github.com/dapr/dapr@v1.14.0 has no charts/none.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "case")
			write(t, filepath.Join(src, ListFile), tc.list)
			if tc.own != "" {
				write(t, filepath.Join(src, tc.own), "ours\n")
			}
			err := Assemble(src, filepath.Join(t.TempDir(), "out"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Assemble: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestModuleNotHad: a module the go command cannot get is an error naming it and the reason.
func TestModuleNotHad(t *testing.T) {
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOFLAGS", "-mod=mod")
	_, err := File(daprModule, "v1.13.99", "", daprCRD)
	const want = "go mod download -json github.com/dapr/dapr@v1.13.99: github.com/dapr/dapr@v1.13.99: module lookup disabled by GOPROXY=off (the tests take this public project's files from its Go module"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("File: %v, want %q...", err, want)
	}
}
