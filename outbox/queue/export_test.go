package queue

// NetworkRetryDue lends the external tests (package queue_test) the rule
// PlanClaim and Charge share.
var NetworkRetryDue = networkRetryDue
