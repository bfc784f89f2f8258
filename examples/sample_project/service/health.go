// Package service exposes the inventory's health check.
package service

import "fmt"

// Status is what the health endpoint reports.
type Status struct {
	Healthy bool
	Detail  string
}

// Check reports whether the stock service is healthy.
func Check(items int) Status {
	if items < 0 {
		return Status{Healthy: false, Detail: fmt.Sprintf("negative count %d", items)}
	}
	return Status{Healthy: true, Detail: "ok"}
}
