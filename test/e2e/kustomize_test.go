package e2e

import (
	"slices"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/retrycap/retrycap/internal/meshwatch"
	"github.com/retrycap/retrycap/internal/operator"
	"github.com/retrycap/retrycap/internal/webhook"
)

const installNamespace = "retrycap-system"

// rendered is a set of rendered objects (config/default as `kubectl kustomize` renders it, the
// chart as `helm template` does), by "Kind name".
type rendered map[string]*unstructured.Unstructured

// renderDefault is config/default as the real `kubectl kustomize` renders it.
func renderDefault(t *testing.T) rendered {
	t.Helper()
	return renderKustomize(t, "default")
}

// get converts the rendered object "kind name" into out, failing the test when it is missing.
func (r rendered) get(t *testing.T, kind, name string, out any) {
	t.Helper()
	u := r[kind+" "+name]
	if u == nil {
		t.Fatalf("config/default renders no %s %s", kind, name)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatalf("%s %s: %v", kind, name, err)
	}
}

func TestDefaultInstall(t *testing.T) {
	objs := renderDefault(t)

	t.Run("the complete set of objects", func(t *testing.T) {
		var got []string
		for k, u := range objs {
			got = append(got, u.GetAPIVersion()+" "+k)
		}
		sort.Strings(got)
		want := []string{
			"admissionregistration.k8s.io/v1 MutatingWebhookConfiguration retrycap-mutating-webhook-configuration",
			"admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration retrycap-validating-webhook-configuration",
			"apiextensions.k8s.io/v1 CustomResourceDefinition clusterretrypolicies.retrycap.dev",
			"apiextensions.k8s.io/v1 CustomResourceDefinition retrypolicies.retrycap.dev",
			"apps/v1 Deployment retrycap-controller-manager",
			"cert-manager.io/v1 Certificate retrycap-serving-cert",
			"cert-manager.io/v1 Certificate retrycap-webhook-ca",
			"cert-manager.io/v1 Issuer retrycap-ca-issuer",
			"cert-manager.io/v1 Issuer retrycap-selfsigned-issuer",
			"policy/v1 PodDisruptionBudget retrycap-controller-manager",
			"rbac.authorization.k8s.io/v1 ClusterRole retrycap-clusterretrypolicy-editor-role",
			"rbac.authorization.k8s.io/v1 ClusterRole retrycap-clusterretrypolicy-viewer-role",
			"rbac.authorization.k8s.io/v1 ClusterRole retrycap-manager-role",
			"rbac.authorization.k8s.io/v1 ClusterRole retrycap-retrypolicy-editor-role",
			"rbac.authorization.k8s.io/v1 ClusterRole retrycap-retrypolicy-viewer-role",
			"rbac.authorization.k8s.io/v1 ClusterRoleBinding retrycap-manager-rolebinding",
			"rbac.authorization.k8s.io/v1 Role retrycap-leader-election-role",
			"rbac.authorization.k8s.io/v1 RoleBinding retrycap-leader-election-rolebinding",
			"v1 Namespace " + installNamespace,
			"v1 Service retrycap-webhook-service",
			"v1 ServiceAccount retrycap-controller-manager",
		}
		if !slices.Equal(got, want) {
			t.Errorf("rendered objects:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		clusterScoped := map[string]bool{"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true,
			"ClusterRoleBinding": true, "MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true}
		for k, u := range objs {
			if ns := u.GetNamespace(); clusterScoped[u.GetKind()] != (ns == "") || (ns != "" && ns != installNamespace) {
				t.Errorf("%s: namespace %q", k, ns)
			}
		}
	})

	t.Run("CRD", func(t *testing.T) {
		var crd apiextensionsv1.CustomResourceDefinition
		objs.get(t, "CustomResourceDefinition", "retrypolicies.retrycap.dev", &crd)
		if crd.Spec.Group != "retrycap.dev" || crd.Spec.Names.Kind != "RetryPolicy" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped ||
			len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1alpha1" || !crd.Spec.Versions[0].Storage || crd.Spec.Versions[0].Subresources == nil {
			t.Errorf("CRD: group %q kind %q scope %q versions %+v", crd.Spec.Group, crd.Spec.Names.Kind, crd.Spec.Scope, crd.Spec.Versions)
		}
	})

	t.Run("RBAC", func(t *testing.T) {
		var role rbacv1.ClusterRole
		objs.get(t, "ClusterRole", "retrycap-manager-role", &role)
		for _, need := range []struct{ group, resource, verb string }{
			{"retrycap.dev", "retrypolicies", "list"}, {"retrycap.dev", "retrypolicies", "watch"},
			{"retrycap.dev", "retrypolicies/status", "patch"},
			{"", "pods", "list"}, {"", "pods", "watch"}, {"", "namespaces", "list"}, {"", "namespaces", "watch"},
			{"", "services", "list"}, {"", "services", "watch"}, {"", "limitranges", "list"}, {"", "limitranges", "watch"},
			{"apps", "deployments", "watch"}, {"apps", "statefulsets", "watch"}, {"apps", "daemonsets", "watch"},
			{"apps", "replicasets", "watch"}, {"batch", "jobs", "watch"}, {"batch", "cronjobs", "watch"},
			{"events.k8s.io", "events", "create"}, {"events.k8s.io", "events", "patch"},
		} {
			if !allows(role.Rules, need.group, need.resource, need.verb) {
				t.Errorf("ClusterRole retrycap-manager-role does not allow %s on %s.%s", need.verb, need.resource, need.group)
			}
		}
		// Every API the mesh watcher may read (it lists and watches each the cluster serves),
		// and what it reads beside them: the Ingresses' IngressClasses, the waypoints' Gateways.
		mesh := [][2]string{{"networking.k8s.io", "ingressclasses"}, {"gateway.networking.k8s.io", "gateways"}, {"", "configmaps"}}
		for _, c := range meshwatch.Candidates {
			mesh = append(mesh, [2]string{c.Group, c.Resource})
		}
		for _, gr := range mesh {
			for _, verb := range []string{"list", "watch"} {
				if !allows(role.Rules, gr[0], gr[1], verb) {
					t.Errorf("ClusterRole retrycap-manager-role does not allow %s on %s.%s (the mesh watcher reads it)", verb, gr[1], gr[0])
				}
			}
		}
		if allows(role.Rules, "", "pods", "update") || allows(role.Rules, "", "secrets", "get") || allows(role.Rules, "", "services", "update") {
			t.Errorf("ClusterRole retrycap-manager-role allows more than it needs: %+v", role.Rules)
		}
		var leader rbacv1.Role
		objs.get(t, "Role", "retrycap-leader-election-role", &leader)
		if !allows(leader.Rules, "coordination.k8s.io", "leases", "update") || !allows(leader.Rules, "", "events", "create") {
			t.Errorf("Role retrycap-leader-election-role: %+v", leader.Rules)
		}
		sa := rbacv1.Subject{Kind: "ServiceAccount", Name: "retrycap-controller-manager", Namespace: installNamespace}
		var crb rbacv1.ClusterRoleBinding
		objs.get(t, "ClusterRoleBinding", "retrycap-manager-rolebinding", &crb)
		if crb.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "retrycap-manager-role"}) || !slices.Equal(crb.Subjects, []rbacv1.Subject{sa}) {
			t.Errorf("ClusterRoleBinding: roleRef %+v subjects %+v", crb.RoleRef, crb.Subjects)
		}
		var rb rbacv1.RoleBinding
		objs.get(t, "RoleBinding", "retrycap-leader-election-rolebinding", &rb)
		if rb.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "retrycap-leader-election-role"}) || !slices.Equal(rb.Subjects, []rbacv1.Subject{sa}) {
			t.Errorf("RoleBinding: roleRef %+v subjects %+v", rb.RoleRef, rb.Subjects)
		}
		for name, label := range map[string]string{"retrycap-retrypolicy-editor-role": "rbac.authorization.k8s.io/aggregate-to-edit", "retrycap-retrypolicy-viewer-role": "rbac.authorization.k8s.io/aggregate-to-view"} {
			var r rbacv1.ClusterRole
			objs.get(t, "ClusterRole", name, &r)
			if r.Labels[label] != "true" || !allows(r.Rules, "retrycap.dev", "retrypolicies", "get") {
				t.Errorf("ClusterRole %s: labels %v rules %+v", name, r.Labels, r.Rules)
			}
		}
	})

	var dep appsv1.Deployment
	objs.get(t, "Deployment", "retrycap-controller-manager", &dep)
	t.Run("manager Deployment", func(t *testing.T) {
		spec := dep.Spec.Template.Spec
		if spec.ServiceAccountName != "retrycap-controller-manager" {
			t.Errorf("serviceAccountName %q", spec.ServiceAccountName)
		}
		if len(spec.Containers) != 1 {
			t.Fatalf("%d containers", len(spec.Containers))
		}
		c := spec.Containers[0]
		if c.Image != "retrycap/manager:v0.1.0" {
			t.Errorf("image %q", c.Image)
		}
		wantArgs := []string{"--leader-elect", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081",
			"--webhook-port=9443", "--proxy-image=" + operator.DefaultProxyImage}
		if !slices.Equal(c.Args, wantArgs) {
			t.Errorf("args %q, want %q", c.Args, wantArgs)
		}
		if len(c.Env) != 2 || c.Env[0].Name != "POD_NAMESPACE" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.namespace" ||
			c.Env[1].Name != "GOMEMLIMIT" || c.Env[1].ValueFrom == nil || c.Env[1].ValueFrom.ResourceFieldRef == nil ||
			*c.Env[1].ValueFrom.ResourceFieldRef != (corev1.ResourceFieldSelector{ContainerName: "manager", Resource: "limits.memory"}) {
			t.Errorf("env %+v: want POD_NAMESPACE from metadata.namespace, GOMEMLIMIT from the manager's limits.memory", c.Env)
		}
		ports := map[string]int32{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		if ports["webhook-server"] != 9443 || ports["health"] != 8081 || ports["metrics"] != 8080 {
			t.Errorf("ports %v", ports)
		}
		for name, probe := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != name || probe.HTTPGet.Port.String() != "health" {
				t.Errorf("probe %s: %+v", name, probe)
			}
		}
		sc := c.SecurityContext
		if sc == nil || !isTrue(sc.RunAsNonRoot) || !isTrue(sc.ReadOnlyRootFilesystem) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("container securityContext %+v", sc)
		}
		if psc := spec.SecurityContext; psc == nil || !isTrue(psc.RunAsNonRoot) || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("pod securityContext %+v", spec.SecurityContext)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("resources %+v", c.Resources)
		}
		// The serving certificate: the Secret cert-manager writes, where the manager reads it
		// (cmd/manager's --webhook-cert-dir default).
		var cert struct {
			Spec struct {
				SecretName string `json:"secretName"`
			} `json:"spec"`
		}
		objs.get(t, "Certificate", "retrycap-serving-cert", &cert)
		var vol string
		for _, v := range spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == cert.Spec.SecretName {
				vol = v.Name
			}
		}
		mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == vol && m.MountPath == "/tmp/k8s-webhook-server/serving-certs" && m.ReadOnly
		})
		if vol == "" || !mounted {
			t.Errorf("no read-only mount of Secret %q at /tmp/k8s-webhook-server/serving-certs: volumes %+v mounts %+v", cert.Spec.SecretName, spec.Volumes, c.VolumeMounts)
		}
	})

	t.Run("webhook Service", func(t *testing.T) {
		var svc corev1.Service
		objs.get(t, "Service", "retrycap-webhook-service", &svc)
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.String() != "webhook-server" {
			t.Errorf("ports %+v", svc.Spec.Ports)
		}
		for k, v := range svc.Spec.Selector {
			if dep.Spec.Template.Labels[k] != v {
				t.Errorf("selector %v does not select the manager's pods (labels %v)", svc.Spec.Selector, dep.Spec.Template.Labels)
			}
		}
		if len(svc.Spec.Selector) == 0 {
			t.Error("empty selector")
		}
	})

	t.Run("webhook configurations", func(t *testing.T) {
		const caFrom = installNamespace + "/retrycap-serving-cert"
		type want struct {
			path    string
			failure admissionregistrationv1.FailurePolicyType
		}
		check := func(cfg string, annotations map[string]string, name string, cc admissionregistrationv1.WebhookClientConfig,
			sel *metav1.LabelSelector, timeout *int32, fp *admissionregistrationv1.FailurePolicyType, w want) {
			if annotations["cert-manager.io/inject-ca-from"] != caFrom {
				t.Errorf("%s: cert-manager.io/inject-ca-from = %q, want %q", cfg, annotations["cert-manager.io/inject-ca-from"], caFrom)
			}
			if cc.Service == nil || cc.Service.Name != "retrycap-webhook-service" || cc.Service.Namespace != installNamespace || cc.Service.Path == nil || *cc.Service.Path != w.path {
				t.Errorf("%s: clientConfig %+v, want service %s/retrycap-webhook-service path %s", name, cc.Service, installNamespace, w.path)
			}
			if timeout == nil || *timeout != 5 {
				t.Errorf("%s: timeoutSeconds %v, want 5", name, timeout)
			}
			if fp == nil || *fp != w.failure {
				t.Errorf("%s: failurePolicy %v, want %s", name, fp, w.failure)
			}
			if sel == nil || len(sel.MatchExpressions) != 1 || sel.MatchExpressions[0].Key != "kubernetes.io/metadata.name" ||
				sel.MatchExpressions[0].Operator != metav1.LabelSelectorOpNotIn || !slices.Equal(sel.MatchExpressions[0].Values, []string{"kube-system", installNamespace}) {
				t.Errorf("%s: namespaceSelector %+v, want kubernetes.io/metadata.name NotIn [kube-system %s]", name, sel, installNamespace)
			}
		}
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		objs.get(t, "MutatingWebhookConfiguration", "retrycap-mutating-webhook-configuration", &mwc)
		mutating := map[string]want{
			"gate.retrycap.dev":   {webhook.GatePath, admissionregistrationv1.Fail},
			"inject.retrycap.dev": {webhook.PodInjectorPath, admissionregistrationv1.Ignore},
		}
		if len(mwc.Webhooks) != len(mutating) {
			t.Errorf("mutating webhooks: %d, want %d", len(mwc.Webhooks), len(mutating))
		}
		for _, wh := range mwc.Webhooks {
			w, ok := mutating[wh.Name]
			if !ok {
				t.Errorf("unexpected mutating webhook %s", wh.Name)
				continue
			}
			check(mwc.Name, mwc.Annotations, wh.Name, wh.ClientConfig, wh.NamespaceSelector, wh.TimeoutSeconds, wh.FailurePolicy, w)
			if wh.SideEffects == nil || *wh.SideEffects != admissionregistrationv1.SideEffectClassNone {
				t.Errorf("%s: sideEffects %v", wh.Name, wh.SideEffects)
			}
		}
		for _, wh := range mwc.Webhooks {
			if wh.Name != "inject.retrycap.dev" {
				continue
			}
			if len(wh.Rules) != 1 || !slices.Equal(wh.Rules[0].Resources, []string{"pods"}) ||
				!slices.Equal(wh.Rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}) {
				t.Errorf("inject.retrycap.dev rules %+v, want pods CREATE", wh.Rules)
			}
		}
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		objs.get(t, "ValidatingWebhookConfiguration", "retrycap-validating-webhook-configuration", &vwc)
		if len(vwc.Webhooks) != 2 || vwc.Webhooks[0].Name != "validate.retrycap.dev" || vwc.Webhooks[1].Name != "validate-cluster.retrycap.dev" {
			t.Fatalf("validating webhooks %+v", vwc.Webhooks)
		}
		wh := vwc.Webhooks[0]
		check(vwc.Name, vwc.Annotations, wh.Name, wh.ClientConfig, wh.NamespaceSelector, wh.TimeoutSeconds, wh.FailurePolicy,
			want{webhook.PolicyValidatorPath, admissionregistrationv1.Fail})
		// A ClusterRetryPolicy is cluster-scoped: no namespaceSelector applies to it.
		cw := vwc.Webhooks[1]
		if cw.NamespaceSelector != nil || cw.ClientConfig.Service == nil || cw.ClientConfig.Service.Path == nil ||
			*cw.ClientConfig.Service.Path != webhook.ClusterPolicyValidatorPath || cw.FailurePolicy == nil || *cw.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("validate-cluster.retrycap.dev: %+v", cw)
		}
	})

	// The CA chain: a self-signed CA, a CA Issuer, the serving Certificate from it, and the
	// webhook configurations' caBundle from the serving Certificate's ca.crt (the CA).
	t.Run("cert-manager objects", func(t *testing.T) {
		checkCertManagerChain(t, "config/default", objs, installNamespace)
	})
}

func isTrue(b *bool) bool { return b != nil && *b }

// allows reports whether rules grant verb on resource in group.
func allows(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if (slices.Contains(r.APIGroups, group) || slices.Contains(r.APIGroups, "*")) &&
			(slices.Contains(r.Resources, resource) || slices.Contains(r.Resources, "*")) &&
			(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) {
			return true
		}
	}
	return false
}
