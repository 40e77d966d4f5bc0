package analyze

import (
	"bytes"
	"fmt"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// ReadKustomization builds the kustomization in dir as `kustomize build dir` does (its
// resources, patches, generators and components; sigs.k8s.io/kustomize/api, no plugins, no
// network) and reads the result into m, under the file name "dir (kustomize build)".
func (r Reader) ReadKustomization(m *Manifests, dir string) []error {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return []error{fmt.Errorf("-k %s: %w", dir, err)}
	}
	out, err := res.AsYaml()
	if err != nil {
		return []error{fmt.Errorf("-k %s: %w", dir, err)}
	}
	return r.read(m, dir+kustomizeSuffix, bytes.NewReader(out))
}

// kustomizeSuffix names the output of a kustomization as a file.
const kustomizeSuffix = " (kustomize build)"
