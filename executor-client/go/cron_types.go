package argoresults

// ClaimState is where a cron tick stands.
type ClaimState string

// The states of a claim: held under a lease, or settled one way or the other.
const (
	ClaimClaimed   ClaimState = "claimed"
	ClaimSubmitted ClaimState = "submitted"
	ClaimSkipped   ClaimState = "skipped"
)

// SettleOutcome is what the holder of a claim did with its tick.
type SettleOutcome string

// The outcomes of a settle.
const (
	// OutcomeSubmitted: the workflow was created, or Kubernetes answered AlreadyExists.
	OutcomeSubmitted SettleOutcome = "submitted"
	// OutcomeSkipped: the tick is not run (e.g. concurrencyPolicy Forbid).
	OutcomeSkipped SettleOutcome = "skipped"
)

// ClaimRequest claims one scheduled tick under a lease before its workflow is created.
// LeaseSeconds (5 to 3600) is left out when 0: the server's default, 60.
type ClaimRequest struct {
	CronWorkflowUID string `json:"cronWorkflowUid"`
	ScheduledTime   string `json:"scheduledTime"`
	WorkflowName    string `json:"workflowName"`
	LeaseSeconds    int64  `json:"leaseSeconds,omitempty"`
}

// SettleRequest records what the holder did: WorkflowUID with OutcomeSubmitted, Reason
// with OutcomeSkipped.
type SettleRequest struct {
	CronWorkflowUID string        `json:"cronWorkflowUid"`
	ScheduledTime   string        `json:"scheduledTime"`
	ClaimID         string        `json:"claimId"`
	Outcome         SettleOutcome `json:"outcome"`
	WorkflowUID     string        `json:"workflowUid,omitempty"`
	Reason          string        `json:"reason,omitempty"`
}

// Claim is a claimed tick. ClaimID, the holder's proof, is set only in the answers to the
// holder. Times are RFC 3339 on the database's clock.
type Claim struct {
	Namespace       string     `json:"namespace"`
	CronWorkflow    string     `json:"cronWorkflow"`
	CronWorkflowUID string     `json:"cronWorkflowUid"`
	ScheduledTime   string     `json:"scheduledTime"`
	WorkflowName    string     `json:"workflowName"`
	State           ClaimState `json:"state"`
	ClaimID         string     `json:"claimId,omitempty"`
	ClaimedAt       string     `json:"claimedAt"`
	LeaseExpiresAt  string     `json:"leaseExpiresAt"`
	TakenOver       bool       `json:"takenOver"`
	SettledAt       *string    `json:"settledAt"`
	WorkflowUID     *string    `json:"workflowUid"`
	Reason          *string    `json:"reason"`
}

// ClaimList is a page of a cron workflow's claims, newest scheduled time first.
// LastScheduledTime is the newest settled tick; Continue is empty on the last page.
type ClaimList struct {
	Items             []Claim `json:"items"`
	LastScheduledTime *string `json:"lastScheduledTime"`
	Continue          string  `json:"continue,omitempty"`
}
