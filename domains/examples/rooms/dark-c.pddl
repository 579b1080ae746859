(define (problem p) (:domain rooms)
  (:objects a b c - room r1 - robot)
  (:init (at r1 a) (door a b) (door b a))
  (:goal (and (lit b) (lit c))))
