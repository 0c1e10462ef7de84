"""waferflow.passes"""
