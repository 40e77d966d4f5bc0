package workload

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
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

// Equal reports whether e and o are the same environment.
func (e AWSEnv) Equal(o AWSEnv) bool {
	return e.Container == o.Container && e.MaxAttempts == o.MaxAttempts && e.Mode == o.Mode && slices.Equal(e.FromRef, o.FromRef)
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
// SDK's tries under the workload's environment (an explicit =N wins), and returns a note per
// upstream so set; an invalid environment is an *EnvError naming the workload.
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
			return nil, &EnvError{Workload: x.Workload, Err: err}
		}
		u.Attempts = int32(tries)
		note := fmt.Sprintf("%s: upstream %q is an AWS endpoint called through the AWS SDK: %d tries (%s)", x.Workload, u.Name, tries, how)
		if len(e.FromRef) > 0 {
			note += fmt.Sprintf("; %s set through valueFrom, not read", strings.Join(e.FromRef, ", "))
		}
		notes = append(notes, note)
	}
	return notes, nil
}
