// Package textbom reads text files the way kubectl's file reader does (cli-runtime decodes
// through unicode.BOMOverride): a UTF-8 byte-order mark at the start is dropped and a file that
// starts with UTF-16's is decoded to UTF-8. Editors on Windows write the first; Windows
// PowerShell 5.1's `kubectl get ... -o yaml > f` and `kubectl logs ... > f` write the second.
// Without it the first line of such a file (a manifest's first document, a log's first attempt)
// was read as junk, or the whole file was: objects and attempts lost without a word. Only a
// file that starts with a BOM is changed; anything else is passed as it is, invalid UTF-8
// included, so that the readers' own errors name it.
package textbom
