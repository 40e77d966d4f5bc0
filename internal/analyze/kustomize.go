package analyze

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// ReadKustomization builds the kustomization in dir with build (internal/analyze/kustomize's
// Build, or `kubectl kustomize`) and reads the result into m, under the file name
// "dir (kustomize build)". A kustomization that names a remote base or file is refused before the
// build (*RemoteError): nothing is fetched.
func (r Reader) ReadKustomization(m *Manifests, dir string, build func(dir string) ([]byte, error)) []error {
	// Before the build: kustomize clones a remote base and GETs a remote file as it meets them.
	if err := checkLocal(dir); err != nil {
		return []error{err}
	}
	out, err := build(dir)
	if err != nil {
		return []error{kustomizeError(dir, err)}
	}
	out = m.kustomizeChatter(dir, out)
	return r.read(m, dir+kustomizeSuffix, bytes.NewReader(out))
}

// remoteResource is the URL in kustomize's error for a resource it could not load.
var remoteResource = regexp.MustCompile(`accumulating resources from '((?:https?|git|ssh)://[^']+|git@[^']+|github\.com/[^']+)'`)

// kustomizeError says what a failed build needs, for the two causes a manifest repository
// commonly has: a remote base that could not be fetched (kustomize's error nests the HTTP and
// the git attempts in one line), and a Helm chart, which retrycap does not render.
func kustomizeError(dir string, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "--enable-helm"):
		return fmt.Errorf("-k %s: the kustomization inflates a Helm chart (helmCharts), which analyze does not render: kustomize build --enable-helm %s | retrycap analyze -f -", dir, dir)
	case remoteResource.MatchString(msg):
		url := remoteResource.FindStringSubmatch(msg)[1]
		last := strings.TrimSpace(msg[strings.LastIndex(strings.TrimSpace(msg), "\n")+1:])
		if i := strings.LastIndex(msg, "fatal: "); i >= 0 {
			last = strings.Join(strings.Fields(msg[i:]), " ")
		}
		return fmt.Errorf("-k %s: the remote resource %s could not be fetched (%s): nothing of the kustomization was read; fetch it (or vendor it) and build again", dir, url, last)
	}
	return fmt.Errorf("-k %s: %w", dir, err)
}

// ChatterPrefix starts the comment lines at the head of a build's output that carry what
// kustomize printed on its own (internal/analyze/kustomize and KubectlKustomize put them there).
const ChatterPrefix = "# kustomize: "

// kustomizeChatter takes kustomize's own lines off the head of out and summarises them in one
// warning: a deprecation notice per kustomization file of a large tree is not about retries, and
// repeated 43 times it buries what is.
func (m *Manifests) kustomizeChatter(dir string, out []byte) []byte {
	var lines []string
	for bytes.HasPrefix(out, []byte(ChatterPrefix)) {
		line, rest, _ := bytes.Cut(out, []byte("\n"))
		lines = append(lines, strings.TrimSpace(strings.TrimPrefix(string(line), ChatterPrefix)))
		out = rest
	}
	if len(lines) == 0 {
		return out
	}
	distinct := map[string]bool{}
	deprecations := 0
	for _, l := range lines {
		distinct[l] = true
		if strings.Contains(l, "deprecated") {
			deprecations++
		}
	}
	what := "line(s)"
	if deprecations == len(lines) {
		what = "deprecation notice(s)"
	}
	m.warn(Source{File: dir + kustomizeSuffix}, "kustomize printed %d %s of its own (%d distinct; e.g. %q): not about retries, not repeated here",
		len(lines), what, len(distinct), strings.TrimPrefix(lines[0], "# "))
	return out
}

// kustomizeSuffix names the output of a kustomization as a file.
const kustomizeSuffix = " (kustomize build)"
