// Package kustomize builds a kustomization in process with sigs.k8s.io/kustomize/api (krusty,
// the library behind kubectl kustomize). It is its own package so that only the full retrycap
// CLI links it (some 34 MB, most of it kyaml's embedded OpenAPI schemas); the kubectl plugin runs
// `kubectl kustomize` instead, which is there wherever the plugin is.
package kustomize

import (
	"bytes"
	"io"
	"log"
	"os"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/retrycap/retrycap/internal/analyze"
)

// mu serialises builds: the capture below swaps the process's stderr.
var mu sync.Mutex

// Build is `kustomize build dir`: its resources, patches, generators and components, with the
// default options (no plugins, load restrictions on; a remote base or file never reaches it:
// analyze.ReadKustomization refuses it before the build). What kustomize prints on its
// own (a "# Warning: 'patchesStrategicMerge' is deprecated" line for every kustomization file of
// the tree, straight to os.Stderr, and its log lines) is captured rather than passed through,
// and put at the head of the output as YAML comment lines, as `kubectl kustomize` users see them:
// analyze summarises them in one warning (analyze.ReadKustomization).
func Build(dir string) ([]byte, error) {
	mu.Lock()
	defer mu.Unlock()
	var chatter bytes.Buffer
	res, err := capture(&chatter, func() ([]byte, error) {
		res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			return nil, err
		}
		return res.AsYaml()
	})
	if err != nil {
		return nil, err
	}
	return append(comments(chatter.String()), res...), nil
}

// capture runs f with os.Stderr and the standard logger writing into buf.
func capture(buf *bytes.Buffer, f func() ([]byte, error)) ([]byte, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return f() // no pipe: let kustomize print
	}
	oldStderr, oldLog := os.Stderr, log.Writer()
	os.Stderr = w
	log.SetOutput(w)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(buf, r)
		close(done)
	}()
	out, ferr := f()
	os.Stderr = oldStderr
	log.SetOutput(oldLog)
	_ = w.Close()
	<-done
	_ = r.Close()
	return out, ferr
}

// comments renders what kustomize printed as YAML comment lines, each after analyze.ChatterPrefix.
func comments(s string) []byte {
	var b bytes.Buffer
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			b.WriteString(analyze.ChatterPrefix + l + "\n")
		}
	}
	return b.Bytes()
}
