(define (problem deliver-1) (:domain delivery)
  (:objects s d x y z - place t1 t2 - truck k1 - package)
  (:init (at t1 s) (at t2 s) (pkg-at k1 s) (road s d) (road d s) (road s x) (road x s) (road x y) (road y x) (road y d) (road d y) (road y z) (road z y))
  (:goal (pkg-at k1 d)))
