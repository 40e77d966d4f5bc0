// Package kustomize builds a kustomization in process with sigs.k8s.io/kustomize/api (krusty,
// the library behind kubectl kustomize). It is its own package so that only the full retrycap
// CLI links it (some 34 MB, most of it kyaml's embedded OpenAPI schemas); the kubectl plugin runs
// `kubectl kustomize` instead, which is there wherever the plugin is.
package kustomize

import (
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Build is `kustomize build dir`: its resources, patches, generators and components, with the
// default options (no plugins, no network, load restrictions on).
func Build(dir string) ([]byte, error) {
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	return res.AsYaml()
}
