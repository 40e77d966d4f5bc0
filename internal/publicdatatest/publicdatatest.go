// Package publicdatatest gives tests files of public projects without the repository carrying
// copies of them: the files are taken at test time from the projects' Go modules, through
// `go mod download -json MODULE@VERSION` (so the user's GOPROXY, GOFLAGS and module cache apply,
// and a cached module needs no network), at a version and a zip hash (h1:) written in the
// repository, so a test reads the same bytes wherever it runs.
//
// A case directory lists what it takes in ListFile, one file a line:
//
//	MODULE@VERSION H1SUM PATH-IN-MODULE NAME-IN-THE-CASE
//
// and Dir gives a temporary directory holding the case directory's own (hand-written) files and
// those. A module that cannot be had, a hash that differs or a missing path is a test failure,
// never a skip: a case that read nothing checked nothing.
package publicdatatest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// ListFile is the name of a case directory's list of module files.
const ListFile = "from-modules.txt"

// Module is one downloaded module.
type Module struct {
	Path, Version, Sum, Dir string
}

var (
	mu      sync.Mutex
	modules = map[string]Module{} // by MODULE@VERSION: one `go` run per module and process
)

// Download finds module@version in the module cache, downloading it if needed, and checks that
// its zip hash is sum (empty: not checked). It runs outside any module (GOWORK off), so no go.mod
// or go.sum of the repository is read or changed.
func Download(module, version, sum string) (Module, error) {
	key := module + "@" + version
	mu.Lock()
	m, ok := modules[key]
	mu.Unlock()
	if !ok {
		var err error
		if m, err = download(key); err != nil {
			return Module{}, err
		}
		mu.Lock()
		modules[key] = m
		mu.Unlock()
	}
	if sum != "" && m.Sum != sum {
		return Module{}, fmt.Errorf("%s: the module's hash is %s, the case was written from %s: its expected output was derived from other bytes", key, m.Sum, sum)
	}
	return m, nil
}

func download(key string) (Module, error) {
	cmd := exec.Command("go", "mod", "download", "-json", key)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	var info struct{ Path, Version, Sum, Dir, Error string }
	jerr := json.Unmarshal(out, &info)
	switch {
	case jerr == nil && info.Error != "":
		return Module{}, fmt.Errorf("go mod download -json %s: %s (the tests take this public project's files from its Go module: check GOPROXY/GOFLAGS, or that the machine can reach the module proxy once)", key, info.Error)
	case runErr != nil || jerr != nil:
		return Module{}, fmt.Errorf("go mod download -json %s: %v %v: %s", key, runErr, jerr, strings.TrimSpace(stderr.String()))
	case info.Dir == "":
		return Module{}, fmt.Errorf("go mod download -json %s: no directory in its answer: %s", key, out)
	}
	return Module{Path: info.Path, Version: info.Version, Sum: info.Sum, Dir: info.Dir}, nil
}

// File is the path of path inside module@version (hash sum), downloaded if needed.
func File(module, version, sum, path string) (string, error) {
	m, err := Download(module, version, sum)
	if err != nil {
		return "", err
	}
	p := filepath.Join(m.Dir, filepath.FromSlash(path))
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s@%s has no %s: %w", module, version, path, err)
	}
	return p, nil
}

// Entry is one line of a ListFile.
type Entry struct {
	Module, Version, Sum, Path, Name string
	Line                             int
}

// ReadList reads dir's ListFile; ok is false when dir is no directory or has none.
func ReadList(dir string) (entries []Entry, ok bool, err error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, false, nil
	}
	name := filepath.Join(dir, ListFile)
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		mod, ver, found := strings.Cut(fields[0], "@")
		if len(fields) != 4 || !found || mod == "" || ver == "" || !strings.HasPrefix(fields[1], "h1:") {
			return nil, true, fmt.Errorf("%s:%d: %q: want MODULE@VERSION H1SUM PATH-IN-MODULE NAME", name, n, line)
		}
		if fields[3] != filepath.Base(fields[3]) || fields[3] == ListFile {
			return nil, true, fmt.Errorf("%s:%d: name %q: want a plain file name", name, n, fields[3])
		}
		entries = append(entries, Entry{Module: mod, Version: ver, Sum: fields[1], Path: fields[2], Name: fields[3], Line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, true, fmt.Errorf("%s: %w", name, err)
	}
	if len(entries) == 0 {
		return nil, true, fmt.Errorf("%s: no module file listed", name)
	}
	return entries, true, nil
}

// Assemble writes into dst (created) dir's own files (its subdirectories too, ListFile left out)
// and every module file its ListFile lists. A listed name that dir also holds is an error: the
// case would not say which one it reads.
func Assemble(dir, dst string) error {
	entries, ok, err := ReadList(dir)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s has no %s", dir, ListFile)
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if rel == ListFile {
			return nil
		}
		return copyFile(p, filepath.Join(dst, rel))
	})
	if err != nil {
		return fmt.Errorf("copying %s: %w", dir, err)
	}
	for _, e := range entries {
		target := filepath.Join(dst, e.Name)
		if _, err := os.Stat(target); err == nil {
			return fmt.Errorf("%s:%d: %s is also a file of %s", filepath.Join(dir, ListFile), e.Line, e.Name, dir)
		}
		src, err := File(e.Module, e.Version, e.Sum, e.Path)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", filepath.Join(dir, ListFile), e.Line, err)
		}
		if err := copyFile(src, target); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies src to dst, writable (the module cache's files are read-only).
func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

// Dir is dir assembled (Assemble) into a new directory of the test's named as dir is (its last
// element), or dir itself when it lists no module file. Any error fails the test.
func Dir(t testing.TB, dir string) string {
	t.Helper()
	if _, ok, err := ReadList(dir); err != nil {
		t.Fatal(err)
	} else if !ok {
		return dir
	}
	dst := filepath.Join(t.TempDir(), filepath.Base(filepath.Clean(dir)))
	if err := Assemble(dir, dst); err != nil {
		t.Fatalf("assembling %s from Go modules: %v", dir, err)
	}
	return dst
}
