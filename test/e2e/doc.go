// Package e2e holds tests of the installable artifacts as a whole: config/default rendered by the
// real kubectl, checked object by object.
package e2e
