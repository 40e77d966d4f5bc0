package workload

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/retrycap/retrycap/internal/mesh"
)

// The AWS SDKs are the app's own retrying client on calls to AWS services (*.amazonaws.com).
// Those calls are TLS from the app, so no proxy or mesh retries them: the SDK's tries are the
// edge's tries. The SDKs read their retry settings from the container's environment
// (AWS SDKs and Tools reference guide, "Retry behavior"):
//
//   - AWS_MAX_ATTEMPTS: total attempts (first included), a number > 0; wins over the mode.
//   - AWS_RETRY_MODE: standard or adaptive make 3 attempts; legacy, the guide's default mode
//     when none is set, is SDK-specific: 4 in the Java SDK (3 retries, its RetryMode.LEGACY),
//     5 in boto3/botocore (its legacy max_attempts). The worst of those general defaults, 5, is
//     assumed (DynamoDB's larger service defaults excepted), and said so in a note.
const (
	EnvAWSMaxAttempts = "AWS_MAX_ATTEMPTS"
	EnvAWSRetryMode   = "AWS_RETRY_MODE"

	// AWSStandardAttempts is the attempts of the standard and adaptive modes.
	AWSStandardAttempts = 3
	// AWSLegacyAttempts is the attempts assumed for the legacy mode (and no mode set).
	AWSLegacyAttempts = 5
)

// AWSEnv is what a workload's containers set of the AWS SDKs' retry environment: the literal
// values, as written, of the container that sets them (the worst when several do).
type AWSEnv struct {
	// Container names the container the values come from; "" when no container sets either.
	Container   string
	MaxAttempts string
	Mode        string
	// FromRef lists the variables set through valueFrom, which a manifest does not show.
	FromRef []string
	// Caller is the container a fix names when no container sets either variable: the first
	// container that is not a mesh proxy. Kept only for a pod that lists an AWS endpoint in
	// retrycap.dev/upstreams (AWSEnvFor), so that the manager's cache holds nothing for the rest.
	Caller string
}

// AWSEnvOf reads the AWS SDK retry environment of a pod spec's containers (init containers
// excluded: they finish before the app serves). Where several containers set it, the one giving
// the most tries is kept; an invalid value is kept so that Parse reports it.
func AWSEnvOf(spec *corev1.PodSpec) AWSEnv {
	var best AWSEnv
	bestTries := int64(-1)
	for _, c := range spec.Containers {
		e := AWSEnv{Container: c.Name}
		set := false
		for _, v := range c.Env {
			switch v.Name {
			case EnvAWSMaxAttempts, EnvAWSRetryMode:
			default:
				continue
			}
			set = true
			if v.ValueFrom != nil {
				e.FromRef = append(e.FromRef, v.Name)
				continue
			}
			if v.Name == EnvAWSMaxAttempts {
				e.MaxAttempts = v.Value
			} else {
				e.Mode = v.Value
			}
		}
		if !set {
			continue
		}
		tries, _, err := e.Tries()
		if err != nil {
			return e // an error wins: it is reported, not hidden behind a valid container
		}
		if tries > bestTries {
			best, bestTries = e, tries
		}
	}
	return best
}

// AWSEnvFor is AWSEnvOf, with Caller set when the pod's retrycap.dev/upstreams annotation
// (upstreams, as written) lists an AWS endpoint and no container sets the variables: the fix of
// such an edge names the container to set AWS_MAX_ATTEMPTS on.
func AWSEnvFor(spec *corev1.PodSpec, upstreams string) AWSEnv {
	e := AWSEnvOf(spec)
	if e.Container != "" || !strings.Contains(strings.ToLower(upstreams), ".amazonaws.com") {
		return e
	}
	for _, c := range spec.Containers {
		if !mesh.IsProxyContainer(c.Name) {
			e.Caller = c.Name
			break
		}
	}
	return e
}

// Equal reports whether e and o are the same environment.
func (e AWSEnv) Equal(o AWSEnv) bool {
	return e.Container == o.Container && e.MaxAttempts == o.MaxAttempts && e.Mode == o.Mode && slices.Equal(e.FromRef, o.FromRef) && e.Caller == o.Caller
}

// Tries is the attempts the SDK makes per call under e, and how that was decided (for a
// note). An invalid value is an error naming the container, variable and value.
func (e AWSEnv) Tries() (int64, string, error) {
	where := "no " + EnvAWSMaxAttempts + " or " + EnvAWSRetryMode + " set"
	if e.Container != "" {
		where = "container " + e.Container
	}
	if s := strings.TrimSpace(e.MaxAttempts); s != "" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 1 {
			return 0, "", fmt.Errorf("container %s: env %s=%q: want a whole number > 0", e.Container, EnvAWSMaxAttempts, e.MaxAttempts)
		}
		return n, fmt.Sprintf("%s %s=%d", where, EnvAWSMaxAttempts, n), nil
	}
	switch strings.ToLower(strings.TrimSpace(e.Mode)) {
	case "standard", "adaptive":
		return AWSStandardAttempts, fmt.Sprintf("%s %s=%s: %d attempts", where, EnvAWSRetryMode, e.Mode, AWSStandardAttempts), nil
	case "legacy":
		return AWSLegacyAttempts, fmt.Sprintf("%s %s=legacy: %d attempts assumed (SDK-specific; the worst general default)", where, EnvAWSRetryMode, AWSLegacyAttempts), nil
	case "":
		return AWSLegacyAttempts, fmt.Sprintf("%s: the SDK's default legacy mode, %d attempts assumed (SDK-specific; the worst general default)", where, AWSLegacyAttempts), nil
	}
	return 0, "", fmt.Errorf("container %s: env %s=%q: want standard, adaptive or legacy", e.Container, EnvAWSRetryMode, e.Mode)
}

// IsAWSHost reports whether an upstream name is an AWS service endpoint (*.amazonaws.com, the
// China regions' *.amazonaws.com.cn included), called through the SDK.
func IsAWSHost(name string) bool {
	n := strings.TrimSuffix(strings.ToLower(name), ".")
	return strings.HasSuffix(n, ".amazonaws.com") || strings.HasSuffix(n, ".amazonaws.com.cn")
}

// EnvError is an invalid value in a workload's container environment that the graph reads.
type EnvError struct {
	Workload Workload
	Err      error
}

func (e *EnvError) Error() string { return fmt.Sprintf("%s: %v", e.Workload, e.Err) }

func (e *EnvError) Unwrap() error { return e.Err }

// applyAWS sets the attempts of x's upstreams that are AWS endpoints listed without "=N" to the
// SDK's tries under the workload's environment (an explicit =N wins), marks them in x.sdk, and
// returns a note per upstream so set; an invalid environment is an *EnvError naming the workload.
func applyAWS(x *Parsed) ([]string, error) {
	var notes []string
	for i := range x.upstreams {
		u := &x.upstreams[i]
		if u.Attempts != 0 || !IsAWSHost(u.Name) {
			continue
		}
		e := x.Workload.AWS
		tries, how, err := e.Tries()
		if err != nil {
			x.sdk = nil
			return nil, &EnvError{Workload: x.Workload, Err: err}
		}
		u.Attempts = int32(tries)
		if x.sdk == nil {
			x.sdk = make([]bool, len(x.upstreams))
		}
		x.sdk[i] = true
		note := fmt.Sprintf("%s: upstream %q is an AWS endpoint called through the AWS SDK: %d tries (%s)", x.Workload, u.Name, tries, how)
		if len(e.FromRef) > 0 {
			note += fmt.Sprintf("; %s set through valueFrom, not read", strings.Join(e.FromRef, ", "))
		}
		notes = append(notes, note)
	}
	return notes, nil
}

// SDKUpstream reports whether x's i-th upstream takes its tries from the AWS SDK's environment
// (an AWS endpoint listed without "=N"): its lever is the container's AWS_MAX_ATTEMPTS, not the
// annotation, which would only tell retrycap a number and leave the SDK as it is.
func (x *Parsed) SDKUpstream(i int) bool { return i < len(x.sdk) && x.sdk[i] }

// EnvFix is the fix of an edge whose tries come from the AWS SDK (DESIGN.md, "Real inputs,
// third round": fixes in the unit of the thing they change): the container's AWS_MAX_ATTEMPTS.
// AWS_MAX_ATTEMPTS wins over AWS_RETRY_MODE in every SDK, so setting it is enough whatever the
// mode; one value covers every AWS call of the container.
type EnvFix struct {
	Workload Workload
	// Container is the container to set the variable on ("" when the pod has none to name).
	Container string
	// From is the variable's value as the suggestion shows it: "10", or "unset (3)" with the
	// tries the SDK makes without it.
	From string
	// To is the new value.
	To int64
}

// PlanEnvFix is the fix that brings x's SDK tries down to tries; false when the SDK already
// makes no more than that (or x has no valid AWS environment).
func PlanEnvFix(x *Parsed, tries int64) (EnvFix, bool) {
	e := x.Workload.AWS
	now, _, err := e.Tries()
	if err != nil || tries >= now || tries < 1 {
		return EnvFix{}, false
	}
	f := EnvFix{Workload: x.Workload, Container: e.Container, To: tries}
	switch {
	case strings.TrimSpace(e.MaxAttempts) != "":
		f.From = strings.TrimSpace(e.MaxAttempts)
	case slices.Contains(e.FromRef, EnvAWSMaxAttempts):
		f.From = fmt.Sprintf("valueFrom, not read (%d assumed)", now)
	default:
		f.From = fmt.Sprintf("unset (%d)", now)
	}
	if f.Container == "" {
		f.Container = e.Caller
	}
	return f, true
}

// Suggestion is "Deployment shop/uploader container app env AWS_MAX_ATTEMPTS: 10 -> 5": the
// same words in analyze, the status, the gate's message and the head of analyze -o patch.
func (f EnvFix) Suggestion() string {
	where := f.Workload.String()
	if f.Container != "" {
		where += " container " + f.Container
	}
	return fmt.Sprintf("%s env %s: %s -> %d", where, EnvAWSMaxAttempts, f.From, f.To)
}

// sdkFixes are the env fixes of a planner's "node: up=N" part, one per selected workload of
// node whose SDK edge to up makes more than N tries; sdk is false when up is no SDK edge of
// node's. others says whether a workload of node declares up with "=N" (or a default) above N
// too: its part stays, in the annotation's unit.
func (r *Result) sdkFixes(part string, byNode map[string][]*Parsed) (fixes []string, sdk, others bool) {
	node, change, ok := strings.Cut(part, ": ")
	if !ok {
		return nil, false, false
	}
	eq := strings.LastIndexByte(change, '=')
	if eq < 0 {
		return nil, false, false
	}
	up := change[:eq]
	n, err := strconv.ParseInt(change[eq+1:], 10, 64)
	if err != nil {
		return nil, false, false
	}
	def := defaultAttempts(r.Spec())
	for _, x := range byNode[node] {
		for i, u := range x.upstreams {
			if r.upstreamNode(x, i) != up {
				continue
			}
			if !x.SDKUpstream(i) {
				a, _ := edgeValues(u, def)
				others = others || a > n
				continue
			}
			sdk = true
			if f, ok := PlanEnvFix(x, n); ok {
				fixes = append(fixes, f.Suggestion())
			}
		}
	}
	return fixes, sdk, others
}

// keptByNode is r's kept workloads by the nodes they are (Nodes), in r.kept's order: built once
// per NameWorkloads, so that a suggestion's parts do not each scan every workload (a 4,000-node
// chain's reconcile took 575 ms, 97 % of it in that scan).
func (r *Result) keptByNode() map[string][]*Parsed {
	by := map[string][]*Parsed{}
	for _, x := range r.kept {
		for _, n := range r.Nodes(x.key) {
			if l := by[n]; len(l) == 0 || l[len(l)-1] != x {
				by[n] = append(l, x)
			}
		}
	}
	return by
}

// SDKFix is the fix of x's edge to up (a node of p's graph) when its tries are the AWS SDK's:
// the EnvFix to tries, and whether the edge is an SDK edge at all (an SDK edge already within
// tries has no fix). The admission gate's message and Rewrite mode ask it.
func (x *Parsed) SDKFix(p *Policy, up string, tries int64) (EnvFix, bool, bool) {
	for i := range x.upstreams {
		if x.SDKUpstream(i) && p.upstreamNode(x, i) == up {
			f, ok := PlanEnvFix(x, tries)
			return f, ok, true
		}
	}
	return EnvFix{}, false, false
}
