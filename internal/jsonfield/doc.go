// Package jsonfield decodes a Kubernetes object's JSON as the API server does (field names
// case-sensitive, an unknown or duplicate field an error) and says where a value of the wrong
// type is: "spec.http[0].retries.attempts: "three" is a string, want an integer", not the Go
// decoder's "cannot unmarshal string into Go struct field .spec.http.retries.attempts of type
// int64", which names neither the list index, the map key nor the value.
//
// It is pure (no Kubernetes client): the CLI's manifest reader and the mesh readers use it.
package jsonfield
