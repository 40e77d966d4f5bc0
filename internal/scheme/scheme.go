package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	retrycapv1alpha1 "github.com/retrycap/retrycap/api/v1alpha1"
)

// New returns a scheme with the built-in types and the retrycap API.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(retrycapv1alpha1.AddToScheme(s))
	return s
}
