// Package docs holds tests that check the project's documentation against the code: the package
// graph in docs/architecture.md against the real imports. It has no code of its own.
package docs
