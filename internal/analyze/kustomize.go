package analyze

import (
	"bytes"
	"fmt"
)

// ReadKustomization builds the kustomization in dir with build (internal/analyze/kustomize's
// Build, or `kubectl kustomize`) and reads the result into m, under the file name
// "dir (kustomize build)".
func (r Reader) ReadKustomization(m *Manifests, dir string, build func(dir string) ([]byte, error)) []error {
	out, err := build(dir)
	if err != nil {
		return []error{fmt.Errorf("-k %s: %w", dir, err)}
	}
	return r.read(m, dir+kustomizeSuffix, bytes.NewReader(out))
}

// kustomizeSuffix names the output of a kustomization as a file.
const kustomizeSuffix = " (kustomize build)"
