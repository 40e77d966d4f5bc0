package kubeobj

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/workload"
)

// A bare Pod's graph input is mostly in its metadata, which is all the manager watches of Pods
// (PodMetadata: Pods outnumber workloads, and a watch of whole Pods would decode every replica's
// spec and status). Two inputs are in its spec: the AWS SDKs' retry environment
// (workload.AWSEnvFor: the tries of an *.amazonaws.com upstream) and the mesh proxy containers
// (workload.ProxiesOf). A Pod's containers and their env cannot change after creation, so
// bareSpecs reads them once per Pod (by UID) with a direct GET, and keeps the little the builder
// reads: what the gate reads from the admission request and analyze from the manifest, the
// status then reads too. Pods a controller owns are never read (their workload is the
// controller's); bare Pods are few.
type bareSpecs struct {
	r   client.Reader
	x   *index.Index
	ctx context.Context
	mu  sync.Mutex
	// byUID holds what was read of each bare Pod's spec (zero values included: read, nothing
	// there), dropped when the Pod goes.
	byUID map[types.UID]bareSpec
}

type bareSpec struct {
	aws     workload.AWSEnv
	proxies []string
}

func newBareSpecs(ctx context.Context, r client.Reader, x *index.Index) *bareSpecs {
	return &bareSpecs{r: r, x: x, ctx: ctx, byUID: map[types.UID]bareSpec{}}
}

// podMeta is obj's metadata when obj is a watched object as metadata (or its tombstone): of
// WatchedKinds, only Pods are watched so.
func podMeta(obj any) (*metav1.PartialObjectMetadata, bool) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	return m, ok
}

// complete returns w (a bare Pod's workload read from metadata m) with its spec's input. The
// first time a Pod is seen its spec is read; when that fails (an API hiccup) w is returned as
// read from its metadata and the read is retried in the background until it succeeds or the Pod
// is gone, the index then given the complete workload: never left short silently.
func (b *bareSpecs) complete(m *metav1.PartialObjectMetadata, w workload.Workload) workload.Workload {
	if b == nil {
		return w
	}
	b.mu.Lock()
	s, ok := b.byUID[m.UID]
	b.mu.Unlock()
	if ok {
		return s.apply(w)
	}
	s, err := b.read(m)
	if err == nil {
		return s.apply(w)
	}
	logf.FromContext(b.ctx).Info("reading a bare Pod's containers failed; retrying", "pod", m.Namespace+"/"+m.Name, "error", err.Error())
	go b.retry(m.DeepCopy(), w)
	return w
}

func (b *bareSpecs) retry(m *metav1.PartialObjectMetadata, w workload.Workload) {
	_ = wait.ExponentialBackoffWithContext(b.ctx, wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Cap: 30 * time.Second, Steps: 1 << 30},
		func(context.Context) (bool, error) {
			s, err := b.read(m)
			switch {
			case err == nil:
				b.x.Put(s.apply(w))
				return true, nil
			case client.IgnoreNotFound(err) == nil:
				return true, nil // gone: its delete event removes it
			case apierrors.IsForbidden(err):
				// RBAC without get on pods: no retry will succeed; said once, the Pod stays as
				// its metadata says.
				logf.FromContext(b.ctx).Error(err, "cannot read a bare Pod's containers: its AWS SDK env and mesh proxies are not counted", "pod", m.Namespace+"/"+m.Name)
				return true, nil
			}
			return false, nil
		})
}

// read GETs the Pod of m, checks it is the same Pod (UID), and keeps its spec's input.
func (b *bareSpecs) read(m *metav1.PartialObjectMetadata) (bareSpec, error) {
	var p corev1.Pod
	if err := b.r.Get(b.ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Name}, &p); err != nil {
		return bareSpec{}, err
	}
	if p.UID != m.UID {
		return bareSpec{}, &staleError{m.Namespace + "/" + m.Name}
	}
	s := bareSpec{aws: workload.AWSEnvFor(&p.Spec, p.Annotations[annotations.Upstreams]), proxies: workload.ProxiesOf(&p.Spec)}
	b.mu.Lock()
	b.byUID[m.UID] = s
	b.mu.Unlock()
	return s, nil
}

// forget drops what was read of a deleted Pod.
func (b *bareSpecs) forget(obj any) {
	if m, ok := podMeta(obj); ok && b != nil {
		b.mu.Lock()
		delete(b.byUID, m.UID)
		b.mu.Unlock()
	}
}

func (s bareSpec) apply(w workload.Workload) workload.Workload {
	w.AWS, w.Proxies = s.aws, s.proxies
	return w
}

// staleError: the Pod of that name is another Pod (recreated) than the event's.
type staleError struct{ pod string }

func (e *staleError) Error() string {
	return "Pod " + e.pod + " was recreated since the event: its new version's event reads it"
}
