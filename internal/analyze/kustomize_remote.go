package analyze

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

// RemoteError is -k on a kustomization that names something kustomize would fetch over the
// network (a git base it clones, a file it GETs over HTTP): analyze reads local files only, so
// that a check in CI or on a laptop neither depends on nor reaches a host the user did not name.
type RemoteError struct {
	Dir   string // the -k directory
	File  string // the kustomization file that names it
	Field string // its field: "resources[0]", "patches[1].path"
	Value string
}

func (e *RemoteError) Error() string {
	what := e.File + ": " + e.Field + " " + strconv.Quote(e.Value)
	if e.File == "" {
		what = strconv.Quote(e.Value) // -k URL
	}
	return fmt.Sprintf("-k %s: %s is remote (kustomize would fetch it with git or HTTP): retrycap reads only local files and does not reach the network; vendor it (a local copy the kustomization names), or build it yourself and give the output with -f -: kustomize build %s | retrycap analyze -f -",
		e.Dir, what, e.Dir)
}

// kustomizationNames are the file names kustomize reads as a kustomization, in its order.
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// loadFields are a kustomization's fields whose entries kustomize loads as a directory or a git
// repository (ldr.New: cloned when the entry parses as a repository URL, before any local look)
// or as a file (ldr.Load: fetched when http(s)).
var (
	dirFields  = map[string]bool{"resources": true, "bases": true, "components": true, "generators": true, "transformers": true, "validators": true}
	fileFields = map[string]bool{"crds": true, "configurations": true, "patchesStrategicMerge": true}
	// Fields of the entries of these lists that name a file: patches[].path, ...Generator[].files.
	entryFileFields = map[string][]string{
		"patches": {"path"}, "patchesJson6902": {"path"}, "replacements": {"path"},
		"configMapGenerator": {"files", "envs", "env"}, "secretGenerator": {"files", "envs", "env"},
	}
)

// checkedFields are the fields above in the order a build meets them (resources first), so the
// entry named is the one kustomize would have fetched first.
var checkedFields = []string{"resources", "bases", "components", "crds", "patchesStrategicMerge", "patches", "patchesJson6902",
	"configMapGenerator", "secretGenerator", "generators", "transformers", "validators", "replacements", "configurations", "openapi"}

// scpUser is git's user@host:path form ("git@github.com:org/repo"), a clone for kustomize.
var scpUser = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]*@`)

// remoteDir reports whether kustomize's ldr.New takes v for a git repository (its
// git.NewRepoSpecFromURL accepts a scheme ssh, https, http or file, a user@ prefix, or a
// github.com/ or github.com: prefix, after an optional git:: prefix).
func remoteDir(v string) bool {
	low := strings.ToLower(strings.TrimSpace(v))
	low = strings.TrimPrefix(low, "git::")
	for _, p := range []string{"https://", "http://", "ssh://", "file://"} {
		if strings.HasPrefix(low, p) {
			return true
		}
	}
	return strings.HasPrefix(low, "github.com/") || strings.HasPrefix(low, "github.com:") || scpUser.MatchString(strings.TrimSpace(v))
}

// remoteFile reports whether kustomize's ldr.Load fetches v with an HTTP GET.
func remoteFile(v string) bool {
	low := strings.ToLower(strings.TrimSpace(v))
	return strings.HasPrefix(low, "http://") || strings.HasPrefix(low, "https://")
}

// checkLocal refuses a kustomization in dir, or one it names locally, that names a remote base or
// file (*RemoteError). A tree it cannot read or parse is left to the build to report.
func checkLocal(dir string) error {
	if remoteDir(dir) {
		return &RemoteError{Dir: dir, Value: dir}
	}
	seen := map[string]bool{}
	var walk func(d string) error
	walk = func(d string) error {
		// The real path: a base that links back to its overlay ("self -> .") is seen once.
		abs, err := filepath.EvalSymlinks(d)
		if err == nil {
			abs, err = filepath.Abs(abs)
		}
		if err != nil || seen[abs] {
			return nil
		}
		seen[abs] = true
		var file string
		var data []byte
		for _, n := range kustomizationNames {
			if b, err := os.ReadFile(filepath.Join(d, n)); err == nil {
				file, data = filepath.Join(d, n), b
				break
			}
		}
		if file == "" {
			return nil
		}
		var k map[string]any
		if yamlv3.Unmarshal(data, &k) != nil {
			return nil
		}
		refuse := func(field, v string) error {
			return &RemoteError{Dir: dir, File: file, Field: field, Value: v}
		}
		var local []string
		for _, key := range checkedFields {
			val, ok := k[key]
			if !ok {
				continue
			}
			list, _ := val.([]any)
			switch {
			case dirFields[key]:
				for i, e := range list {
					s, ok := e.(string)
					if !ok {
						continue
					}
					if remoteDir(s) {
						return refuse(fmt.Sprintf("%s[%d]", key, i), s)
					}
					if st, err := os.Stat(filepath.Join(d, s)); err == nil && st.IsDir() {
						local = append(local, filepath.Join(d, s))
					}
				}
			case fileFields[key]:
				for i, e := range list {
					if s, ok := e.(string); ok && remoteFile(s) {
						return refuse(fmt.Sprintf("%s[%d]", key, i), s)
					}
				}
			case key == "openapi":
				if o, ok := val.(map[string]any); ok {
					if s, ok := o["path"].(string); ok && remoteFile(s) {
						return refuse("openapi.path", s)
					}
				}
			case entryFileFields[key] != nil:
				for i, e := range list {
					o, ok := e.(map[string]any)
					if !ok {
						continue
					}
					for _, f := range entryFileFields[key] {
						vals := []any{o[f]}
						l, isList := o[f].([]any)
						if isList {
							vals = l
						}
						for j, x := range vals {
							s, ok := x.(string)
							if !ok {
								continue
							}
							// A generator's files entry may be KEY=PATH.
							if _, p, ok := strings.Cut(s, "="); ok && f == "files" {
								s = p
							}
							if remoteFile(s) {
								field := fmt.Sprintf("%s[%d].%s", key, i, f)
								if isList {
									field += fmt.Sprintf("[%d]", j)
								}
								return refuse(field, s)
							}
						}
					}
				}
			}
		}
		for _, l := range local {
			if err := walk(l); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(dir)
}
