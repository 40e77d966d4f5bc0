package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/meshwatch"
)

// The mesh gate's webhook: served at MeshPath, configured by the manager itself in the
// MutatingWebhookConfiguration MeshWebhookConfiguration with rules for the mesh APIs the cluster
// serves only (a rule for an API the cluster lacks would be harmless, but one for an API
// installed later would be missing: the manager follows discovery).
const (
	MeshPath                 = "/gate-mesh"
	MeshWebhookConfiguration = "retrycap-mesh"
	MeshWebhookName          = "mesh.retrycap.dev"
	// GateWebhookName is the workload gate's webhook, whose clientConfig (where the API server
	// reaches the manager, and the CA that signs its certificate) the mesh webhook copies.
	GateWebhookName = "gate.retrycap.dev"
	// meshConfigHash records the desired configuration the manager last wrote: the API server
	// defaults fields, so comparing the stored object with the desired one would always differ.
	meshConfigHash = "retrycap.dev/config-hash"
)

// meshConfigResync is how often the configuration is checked again (the CA is rotated, or
// cert-manager injects it after the manager started).
const meshConfigResync = 30 * time.Second

// The mesh gate reads the mesh kinds (meshwatch's informers) and manages its own webhook
// configuration: any MutatingWebhookConfiguration is read to find the workload gate's (its name
// differs between config/ and the chart), only retrycap-mesh is changed or deleted.
// +kubebuilder:rbac:groups=networking.istio.io,resources=virtualservices;serviceentries,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes;grpcroutes;gateways,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.envoyproxy.io,resources=backendtrafficpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=linkerd.io,resources=serviceprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.linkerd.io,resources=httproutes,verbs=get;list;watch
// +kubebuilder:rbac:groups=kuma.io,resources=meshes;meshretries;meshexternalservices;meshhttproutes,verbs=get;list;watch
// +kubebuilder:rbac:groups=dapr.io,resources=resiliencies,verbs=get;list;watch
// +kubebuilder:rbac:groups=consul.hashicorp.com,resources=servicerouters,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses;ingressclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces;services;configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;daemonsets;statefulsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,resourceNames=retrycap-mesh,verbs=update;patch;delete

// MeshSource is the mesh watcher as the webhooks read it.
type MeshSource interface {
	Set() *mesh.Set
	Read() []meshwatch.API
	OnAPIsChange(func([]meshwatch.API))
	// OnChange subscribes to every change of the Set (the workload gate's prepared graphs are
	// rebuilt with it).
	OnChange(func(meshwatch.Affected))
}

// MeshGate is the admission.Handler of the mesh webhook: DecideMesh over the namespace's
// policies and workloads from the manager's cache and the watcher's Set.
type MeshGate struct {
	policies client.Reader
	index    *index.Index
	mesh     MeshSource
	skip     map[string]bool
	log      logr.Logger
}

// meshConfigMapRequests counts the ConfigMap requests the mesh webhooks of this process
// received: the match condition lets only those the manager reads reach them (the tests read it).
var meshConfigMapRequests atomic.Int64

// MeshConfigMapRequests is the number of ConfigMap admission requests the mesh gates of this
// process received.
func MeshConfigMapRequests() int64 { return meshConfigMapRequests.Load() }

// Handle implements admission.Handler.
func (g *MeshGate) Handle(ctx context.Context, req admission.Request) admission.Response {
	configMap := req.Kind.Group == "" && req.Kind.Kind == "ConfigMap"
	if configMap {
		meshConfigMapRequests.Add(1)
	}
	if g.skip[req.Namespace] {
		return admission.Allowed("retrycap does not gate namespace " + req.Namespace)
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	set := g.mesh.Set()
	if set == nil {
		return admission.Allowed("")
	}
	if configMap && !g.readsConfigMap(set, req) {
		// Behind the match condition, written from an earlier Set: not a ConfigMap read now.
		return admission.Allowed("")
	}
	raw, generated, err := withIdentity(req.Object.Raw, req.Namespace)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding %s %s/%s: %w", req.Kind.Kind, req.Namespace, req.Name, err))
	}
	var old []byte
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		if old, _, err = withIdentity(req.OldObject.Raw, req.Namespace); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the stored %s %s/%s: %w", req.Kind.Kind, req.Namespace, req.Name, err))
		}
	}
	if resp, ok := waitSynced(ctx, g.index.HasSynced, "retrycap mesh gate"); !ok {
		return resp
	}
	bears := MeshBearsOn(req.Namespace, raw, old)
	policies, err := g.affectedPolicies(ctx, bears)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	clusters, err := g.clusterPolicies(ctx, req.Namespace, bears, set, raw, old)
	if err != nil {
		return admission.Errored(http.StatusServiceUnavailable, err)
	}
	if len(policies) == 0 && len(clusters) == 0 {
		return admission.Allowed("")
	}
	in := MeshInput{Policies: policies, ClusterPolicies: clusters, Workloads: g.index.Parsed(req.Namespace), Services: g.index.Services(req.Namespace),
		Set: set, Object: raw, Old: old}
	for _, p := range policies {
		if _, ok := in.Namespaces[p.Namespace]; p.Namespace == req.Namespace || ok {
			continue
		}
		if in.Namespaces == nil {
			in.Namespaces = map[string]MeshNamespace{}
		}
		in.Namespaces[p.Namespace] = MeshNamespace{Workloads: g.index.Parsed(p.Namespace), Services: g.index.Services(p.Namespace)}
	}
	var d MeshDecision
	if configMap {
		d = DecideMeshConfigMap(in) // mesh_configmap.go
	} else {
		d = DecideMesh(in)
	}
	d = d.renamed(generated)
	return verdictResponse(d.Allowed, d.Message, d.Warnings, d.Patch)
}

// affectedPolicies are the RetryPolicies of the namespaces whose chains the object (as sent, and
// as stored) bears on (MeshBearsOn: its own namespace, a VirtualService's exportTo namespaces,
// or every namespace), from the cache.
func (g *MeshGate) affectedPolicies(ctx context.Context, bears MeshBearing) ([]*v1alpha1.RetryPolicy, error) {
	namespaces, all := bears.Namespaces, bears.All
	var lists []v1alpha1.RetryPolicyList
	if all {
		var list v1alpha1.RetryPolicyList
		if err := g.policies.List(ctx, &list); err != nil {
			return nil, fmt.Errorf("retrycap mesh gate: listing the RetryPolicies from the cache: %w", err)
		}
		lists = append(lists, list)
	} else {
		names := make([]string, 0, len(namespaces))
		for n := range namespaces {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if g.skip[n] {
				continue
			}
			var list v1alpha1.RetryPolicyList
			if err := g.policies.List(ctx, &list, client.InNamespace(n)); err != nil {
				return nil, fmt.Errorf("retrycap mesh gate: listing the RetryPolicies of namespace %s from the cache: %w", n, err)
			}
			lists = append(lists, list)
		}
	}
	var out []*v1alpha1.RetryPolicy
	for i := range lists {
		for j := range lists[i].Items {
			if p := &lists[i].Items[j]; !g.skip[p.Namespace] {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// renamed is d with the stand-in of a name still to be generated (withIdentity) written as the
// user can read it, "ratings-<generated>", as renameStandIn writes a workload's.
func (d MeshDecision) renamed(generated string) MeshDecision {
	if generated == "" {
		return d
	}
	d.Message = strings.ReplaceAll(d.Message, generated+standInSuffix, generated+"<generated>")
	d.Warnings = slices.Clone(d.Warnings)
	for i, w := range d.Warnings {
		d.Warnings[i] = strings.ReplaceAll(w, generated+standInSuffix, generated+"<generated>")
	}
	return d
}

// withIdentity is raw with what the API server fills in after the mutating webhooks: its
// namespace (the request's) where it has none, and, for a name still to be generated
// (generateName alone), a stand-in, generated (generateName cut as the API server cuts it) and
// standInSuffix, which no generated name ends with; generated is "" for a named object. The mesh
// gate refused such an object, "VirtualService object without metadata.name", whatever its
// routes (adv20). The object is re-encoded only then, its numbers kept as written (UseNumber).
func withIdentity(raw []byte, ns string) (out []byte, generated string, err error) {
	if len(raw) == 0 {
		return nil, "", fmt.Errorf("the request carries no object")
	}
	var m struct {
		Metadata struct {
			Name         string `json:"name"`
			GenerateName string `json:"generateName"`
			Namespace    string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, "", err
	}
	setNS := m.Metadata.Namespace == "" && ns != ""
	if m.Metadata.Name == "" && m.Metadata.GenerateName != "" {
		generated = m.Metadata.GenerateName
		if len(generated) > maxGeneratedBase {
			generated = generated[:maxGeneratedBase]
		}
	}
	if !setNS && generated == "" {
		return raw, "", nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, "", err
	}
	md, _ := doc["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		doc["metadata"] = md
	}
	if setNS {
		md["namespace"] = ns
	}
	if generated != "" {
		md["name"] = generated + standInSuffix
	}
	out, err = json.Marshal(doc)
	return out, generated, err
}

// meshConfigurer keeps MeshWebhookConfiguration in line with the APIs the watcher reads: rules
// for exactly those (Services, for their Linkerd annotations, when a Linkerd API is read), the
// gate webhook's clientConfig with MeshPath, its namespaceSelector; deleted when none is read.
type meshConfigurer struct {
	reader client.Reader // direct: the manager caches no webhook configuration
	writer client.Client
	mesh   MeshSource
	log    logr.Logger
	kick   chan struct{}
}

// NeedLeaderElection: one writer of the configuration.
func (c *meshConfigurer) NeedLeaderElection() bool { return true }

func (c *meshConfigurer) Start(ctx context.Context) error {
	kick := func() {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	c.mesh.OnAPIsChange(func([]meshwatch.API) { kick() })
	// A controller naming another ConfigMap (or none any more) changes the ConfigMap webhook's
	// match condition: written at once, not at the next resync.
	var mu sync.Mutex
	var named []string
	c.mesh.OnChange(func(meshwatch.Affected) {
		var refs []string
		if s := c.mesh.Set(); s != nil {
			refs = s.IngressNginxConfigMaps()
		}
		mu.Lock()
		changed := !slices.Equal(refs, named)
		named = refs
		mu.Unlock()
		if changed {
			kick()
		}
	})
	t := time.NewTicker(meshConfigResync)
	defer t.Stop()
	var last string
	for {
		if err := c.Sync(ctx); err != nil {
			if msg := err.Error(); msg != last {
				// Once per distinct error: the resync would repeat it every 30 s.
				c.log.Error(err, "configuring the mesh webhook; retrying", "every", meshConfigResync.String())
				last = msg
			}
		} else {
			last = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-c.kick:
		}
	}
}

// Sync writes the configuration once.
func (c *meshConfigurer) Sync(ctx context.Context) error {
	apis := c.mesh.Read()
	var cur admissionregistrationv1.MutatingWebhookConfiguration
	err := c.reader.Get(ctx, types.NamespacedName{Name: MeshWebhookConfiguration}, &cur)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", MeshWebhookConfiguration, err)
	}
	if len(apis) == 0 {
		if exists {
			if err := c.writer.Delete(ctx, &cur); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting MutatingWebhookConfiguration %s: %w", MeshWebhookConfiguration, err)
			}
			c.log.Info("deleted the mesh webhook configuration: no mesh API is read", "name", MeshWebhookConfiguration)
		}
		return nil
	}
	owner, gateHook, err := c.gateWebhook(ctx)
	if err != nil {
		return err
	}
	meshHook, err := MeshWebhook(apis, gateHook)
	if err != nil {
		return err
	}
	want := []admissionregistrationv1.MutatingWebhook{meshHook}
	var refs []string
	if s := c.mesh.Set(); s != nil {
		refs = s.IngressNginxConfigMaps()
	}
	if cm, ok := MeshConfigMapWebhook(apis, refs, meshHook); ok {
		want = append(want, cm) // mesh_configmap.go
	}
	member, err := MeshMembershipWebhook(apis, gateHook) // mesh_membership.go
	if err != nil {
		return err
	}
	want = append(want, member)
	// Owned by the gate's configuration: uninstalling retrycap (which deletes that one) lets the
	// garbage collector delete this one, which no installer knows of.
	ref := metav1.OwnerReference{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration", Name: owner.Name, UID: owner.UID}
	data, _ := json.Marshal(struct {
		Webhooks []admissionregistrationv1.MutatingWebhook
		Owner    metav1.OwnerReference
	}{want, ref})
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:8])
	if exists && cur.Annotations[meshConfigHash] == hash {
		return nil
	}
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: MeshWebhookConfiguration,
			Labels:          map[string]string{"app.kubernetes.io/managed-by": "retrycap-manager"},
			Annotations:     map[string]string{meshConfigHash: hash},
			OwnerReferences: []metav1.OwnerReference{ref}},
		Webhooks: want,
	}
	if exists {
		cfg.ResourceVersion = cur.ResourceVersion
		if err := c.writer.Update(ctx, cfg); err != nil {
			return fmt.Errorf("updating MutatingWebhookConfiguration %s: %w", MeshWebhookConfiguration, err)
		}
	} else if err := c.writer.Create(ctx, cfg); err != nil {
		return fmt.Errorf("creating MutatingWebhookConfiguration %s: %w", MeshWebhookConfiguration, err)
	}
	c.log.Info("configured the mesh webhook", "name", MeshWebhookConfiguration, "apis", meshwatch.Names(apis), "ingressNginxConfigMaps", refs)
	return nil
}

// gateWebhook finds the workload gate's webhook in whichever MutatingWebhookConfiguration holds
// it (config/ and the chart name them differently), with its CA bundle in place.
func (c *meshConfigurer) gateWebhook(ctx context.Context) (*admissionregistrationv1.MutatingWebhookConfiguration, admissionregistrationv1.MutatingWebhook, error) {
	var list admissionregistrationv1.MutatingWebhookConfigurationList
	if err := c.reader.List(ctx, &list); err != nil {
		return nil, admissionregistrationv1.MutatingWebhook{}, fmt.Errorf("listing the MutatingWebhookConfigurations to find %s: %w", GateWebhookName, err)
	}
	for i := range list.Items {
		cfg := &list.Items[i]
		for _, h := range cfg.Webhooks {
			if h.Name != GateWebhookName {
				continue
			}
			if len(h.ClientConfig.CABundle) == 0 {
				return nil, h, fmt.Errorf("MutatingWebhookConfiguration %s webhook %s has no clientConfig.caBundle yet (cert-manager injects it): the mesh webhook copies it", cfg.Name, GateWebhookName)
			}
			return cfg, h, nil
		}
	}
	return nil, admissionregistrationv1.MutatingWebhook{}, fmt.Errorf("no MutatingWebhookConfiguration has webhook %s, whose clientConfig (service and CA bundle) the mesh webhook copies: install config/webhook or the chart's webhooks", GateWebhookName)
}

// MeshWebhook is the mesh webhook for apis, reached as gate is (its clientConfig with MeshPath,
// its namespaceSelector). Failure policy Ignore: the configuration is the manager's, not the
// installer's, so it outlives an uninstalled manager until deleted, and must never block mesh
// changes then; the controller still reports any chain over its cap in the policies' status.
func MeshWebhook(apis []meshwatch.API, gateHook admissionregistrationv1.MutatingWebhook) (admissionregistrationv1.MutatingWebhook, error) {
	cc, err := clientConfigAt(gateHook, MeshPath)
	if err != nil {
		return admissionregistrationv1.MutatingWebhook{}, err
	}
	byGroup := map[string][]string{}
	var groups []string
	linkerd := false
	for _, a := range apis {
		if _, ok := byGroup[a.Group]; !ok {
			groups = append(groups, a.Group)
		}
		if !slices.Contains(byGroup[a.Group], a.Resource) {
			byGroup[a.Group] = append(byGroup[a.Group], a.Resource)
		}
		if a.Group == mesh.GroupLinkerd || a.Group == mesh.GroupLinkerdPol {
			linkerd = true
		}
	}
	ops := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	scope := admissionregistrationv1.NamespacedScope
	var rules []admissionregistrationv1.RuleWithOperations
	for _, g := range groups {
		rules = append(rules, admissionregistrationv1.RuleWithOperations{Operations: ops,
			Rule: admissionregistrationv1.Rule{APIGroups: []string{g}, APIVersions: []string{"*"}, Resources: byGroup[g], Scope: &scope}})
	}
	if linkerd {
		rules = append(rules, admissionregistrationv1.RuleWithOperations{Operations: ops,
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}, Scope: &scope}})
	}
	fail := admissionregistrationv1.Ignore
	side := admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	never := admissionregistrationv1.NeverReinvocationPolicy
	timeout := int32(5)
	return admissionregistrationv1.MutatingWebhook{
		Name:                    MeshWebhookName,
		AdmissionReviewVersions: []string{"v1"},
		ClientConfig:            cc,
		Rules:                   rules,
		NamespaceSelector:       gateHook.NamespaceSelector,
		// Only a Service with a Linkerd retry annotation can raise a Linkerd layer.
		MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "linkerd-retries-on-services",
			Expression: "request.kind.kind != 'Service' || (has(object.metadata.annotations) && " +
				"object.metadata.annotations.exists(k, k.startsWith('" + strings.TrimSuffix(mesh.LinkerdRetryLimit, "limit") + "')))"}},
		FailurePolicy:      &fail,
		MatchPolicy:        &equivalent,
		SideEffects:        &side,
		TimeoutSeconds:     &timeout,
		ReinvocationPolicy: &never,
	}, nil
}

// clientConfigAt is gateHook's clientConfig (its Service or URL, its CA bundle) with path.
func clientConfigAt(gateHook admissionregistrationv1.MutatingWebhook, path string) (admissionregistrationv1.WebhookClientConfig, error) {
	cc := *gateHook.ClientConfig.DeepCopy()
	switch {
	case cc.Service != nil:
		cc.Service.Path = &path
	case cc.URL != nil:
		u, err := url.Parse(*cc.URL)
		if err != nil {
			return cc, fmt.Errorf("webhook %s clientConfig.url %q: %w", GateWebhookName, *cc.URL, err)
		}
		u.Path = path
		s := u.String()
		cc.URL = &s
	default:
		return cc, fmt.Errorf("webhook %s has neither clientConfig.service nor clientConfig.url", GateWebhookName)
	}
	return cc, nil
}
