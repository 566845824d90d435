"""gradcalc's expression language: a Lark grammar, a compiler to flat code, a stack machine.

    from gradcalc.parser import Session, compile_program
    session = Session()
    session.run_source("x = 3; y = x ** 2")
"""
from .compiler import Program, Statement, UserFunction, compile_program
from .errors import ErrorKind, LanguageError
from .machine import CheckStatementResult, ExpressionResult, HelpResult, Session

__all__ = [
    "CheckStatementResult", "ErrorKind", "ExpressionResult", "HelpResult", "LanguageError", "Program", "Session", "Statement", "UserFunction",
    "compile_program",
]
