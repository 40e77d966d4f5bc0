// Command images writes a container image as a docker-archive tarball from static Go binaries,
// without a daemon or a registry (go-containerregistry): one layer holding the binaries, an
// entrypoint and a numeric user. `make images` runs it for the manager, the proxy, the lab app and
// the test node's pause image; the tarballs load with `ctr images import`, `kind load
// image-archive` or `crane push`.
//
//	images -ref REPO:TAG -out FILE [-user UID:GID] [-entrypoint /path] SRC=DST...
//
// A module of its own: go-containerregistry's dependencies would move the product's.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	ref := flag.String("ref", "", "image reference REPO:TAG (required)")
	out := flag.String("out", "", "tarball to write (required)")
	user := flag.String("user", "65532:65532", "the image's user (numeric: the images carry no /etc/passwd)")
	entry := flag.String("entrypoint", "", "entrypoint; default the first file's destination")
	flag.Parse()
	if err := run(*ref, *out, *user, *entry, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(ref, out, user, entry string, files []string) error {
	if ref == "" || out == "" || len(files) == 0 {
		return fmt.Errorf("-ref, -out and at least one SRC=DST are required")
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("-ref %q: %w", ref, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// A fixed time: the same binaries give the same image digest.
	mtime := time.Unix(0, 0)
	dirs := map[string]bool{}
	addDir := func(d string) error {
		for _, p := range parents(d) {
			if dirs[p] {
				continue
			}
			dirs[p] = true
			mode := int64(0o755)
			if p == "tmp" {
				mode = 0o1777
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode, ModTime: mtime}); err != nil {
				return err
			}
		}
		return nil
	}
	// /tmp: Go's os.TempDir and a read-only root filesystem with an emptyDir both expect it.
	if err := addDir("tmp"); err != nil {
		return err
	}
	for i, f := range files {
		src, dst, ok := strings.Cut(f, "=")
		if !ok || src == "" || !strings.HasPrefix(dst, "/") {
			return fmt.Errorf("file argument %q: want SRC=/DST", f)
		}
		if i == 0 && entry == "" {
			entry = dst
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("read %s: %w", src, err)
		}
		rel := strings.TrimPrefix(dst, "/")
		if err := addDir(path.Dir(rel)); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o755, Size: int64(len(data)), ModTime: mtime}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Created = v1.Time{Time: mtime}
	cf.Config.Entrypoint = []string{entry}
	cf.Config.User = user
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return os.Rename(tmp, out)
}

// parents lists d and its ancestors, outermost first ("a/b" -> "a", "a/b").
func parents(d string) []string {
	if d == "." || d == "" {
		return nil
	}
	return append(parents(path.Dir(d)), d)
}
