-- admin/actions.py: Operator actions: approve, reject, cancel, requeue, fork, pause, resume.

-- name: decide
SELECT {schema}.decide_approval(%s, %s, %s, %s, %s);

-- name: cancel
SELECT {schema}.cancel_execution(%s, %s, %s);

-- name: requeue
SELECT {schema}.requeue_execution(%s, %s, %s);

-- name: fork
SELECT {schema}.fork_execution(%s, %s, %s, %s, %s, %s, %s);

-- name: pause
SELECT {schema}.pause_execution(%s, %s, %s);

-- name: resume
SELECT {schema}.resume_execution(%s, %s, %s);
