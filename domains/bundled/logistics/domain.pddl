; Logistics with action costs: trucks move packages inside a city, airplanes between airports.
; Flying (cost 5) is dearer than driving (cost 2); loading and unloading cost 1.
(define (domain logistics)
  (:requirements :strips :typing :action-costs)
  (:types
    truck airplane - vehicle
    package vehicle - physobj
    airport - location
    location city)
  (:predicates
    (in-city ?l - location ?c - city)
    (at ?o - physobj ?l - location)
    (in ?p - package ?v - vehicle))
  (:functions (total-cost) - number)

  (:action load-truck
    :parameters (?p - package ?t - truck ?l - location)
    :precondition (and (at ?t ?l) (at ?p ?l))
    :effect (and (in ?p ?t) (not (at ?p ?l)) (increase (total-cost) 1)))

  (:action load-airplane
    :parameters (?p - package ?a - airplane ?l - airport)
    :precondition (and (at ?a ?l) (at ?p ?l))
    :effect (and (in ?p ?a) (not (at ?p ?l)) (increase (total-cost) 1)))

  (:action unload-truck
    :parameters (?p - package ?t - truck ?l - location)
    :precondition (and (at ?t ?l) (in ?p ?t))
    :effect (and (at ?p ?l) (not (in ?p ?t)) (increase (total-cost) 1)))

  (:action unload-airplane
    :parameters (?p - package ?a - airplane ?l - airport)
    :precondition (and (at ?a ?l) (in ?p ?a))
    :effect (and (at ?p ?l) (not (in ?p ?a)) (increase (total-cost) 1)))

  (:action drive-truck
    :parameters (?t - truck ?from - location ?to - location ?c - city)
    :precondition (and (at ?t ?from) (in-city ?from ?c) (in-city ?to ?c))
    :effect (and (at ?t ?to) (not (at ?t ?from)) (increase (total-cost) 2)))

  (:action fly-airplane
    :parameters (?a - airplane ?from - airport ?to - airport)
    :precondition (at ?a ?from)
    :effect (and (at ?a ?to) (not (at ?a ?from)) (increase (total-cost) 5))))
